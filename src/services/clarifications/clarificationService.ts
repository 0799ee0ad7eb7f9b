import type { Logger } from 'pino';
import type { UnresolvedBundle } from '../../repository/clarifications/clarifications.js';
import type { MessageRecord, TurnRecord } from '../../repository/rowMapping.js';
import { isLiveClarification } from '../../turns/liveClarification.js';
import { messageUpdatedEvents } from '../messageUpdatedEvents.js';
import { publishOrRefresh } from '../publishOrRefresh.js';
import { recoverPendingDeliveries, type RecoveryOptions, type RecoveryReport } from './recoverPendingDeliveries.js';
import {
  failure,
  type DetachReply,
  type ExpireReply,
  type GuardReply,
  type ListPendingReply,
  type PendingActionsReply,
  type PendingBundle,
  type RespondReply,
  type TurnPayload,
  type TurnsReply,
} from '../../contract/replies.js';
import type { ListPendingRequest, RespondRequest, SessionRequest, TaskRequest } from '../../contract/requests.js';
import { respondToClarification, type RespondDeps } from './respondToClarification.js';

/**
 * The clarification lifecycle over the bus (ADR 0001, the current-turn authority).
 *
 * Vocabulary:
 * - bundle: the `clarification_request` rows sharing `metadata.pending_id`, one per question;
 * - current turn: the session's newest durable conversational turn (src/repository/turns/currentTurnAuthority.ts);
 *   a bundle is operational only while its rows sit on it;
 * - superseded: the bundle's turn is no longer current; its pending rows are inert history;
 * - detached: `agent_disconnected: true`; the agent's live waiter is gone, the question stays
 *   answerable (an answer becomes a resume command) while its turn is current;
 * - claim: the atomic move of a current-turn bundle's pending rows to its terminal status, marked
 *   `response_delivery_pending` until delivery is finalised or the claim is restored.
 *
 * Every method returns a reply value; the bus endpoints (src/events/serviceEndpoints.ts) only transport them.
 */
export type ClarificationServiceDeps = RespondDeps;

export interface ClarificationService {
  respond(request: RespondRequest): Promise<RespondReply>;
  listPending(request: ListPendingRequest): Promise<ListPendingReply>;
  detach(request: SessionRequest): Promise<DetachReply>;
  expire(request: SessionRequest): Promise<ExpireReply>;
  guard(request: SessionRequest): Promise<GuardReply>;
  turns(request: SessionRequest): Promise<TurnsReply>;
  pendingActions(request: TaskRequest): Promise<PendingActionsReply>;
  recoverPendingDeliveries(options: RecoveryOptions): Promise<RecoveryReport>;
}

const distinct = (values: Iterable<string>) => [...new Set(values)];
const pendingIdsOf = (rows: readonly MessageRecord[]) =>
  distinct(rows.map((r) => r.metadata.pending_id).filter((p): p is string => typeof p === 'string' && p !== ''));

function toPendingBundle(bundle: UnresolvedBundle): PendingBundle {
  return {
    pending_id: bundle.pendingId,
    session_id: bundle.sessionId,
    task_id: bundle.taskId,
    workspace_id: bundle.workspaceId,
    turn_id: bundle.turnId,
    created_at: bundle.createdAt,
    context: bundle.context,
    questions: bundle.questions.map((q) => ({
      message_id: q.messageId,
      question_id: q.questionId,
      question: q.question,
      status: q.status,
      agent_disconnected: q.agentDisconnected,
    })),
  };
}

function toTurnPayload(turn: TurnRecord): TurnPayload {
  return {
    id: turn.id,
    session_id: turn.sessionId,
    task_id: turn.taskId,
    started_at: turn.startedAt,
    created_at: turn.createdAt,
    updated_at: turn.updatedAt,
    ...(turn.completedAt !== null ? { completed_at: turn.completedAt } : {}),
    metadata: turn.metadata,
  };
}

export function createClarificationService(deps: ClarificationServiceDeps): ClarificationService {
  const { store } = deps;
  const log: Logger = deps.logger.child({ component: 'clarification-service' });
  const publishRows = async (rows: MessageRecord[]) => {
    if (rows.length > 0) await publishOrRefresh(deps, log, rows[0]!.taskId, messageUpdatedEvents(rows));
  };

  return {
    respond: (request) => respondToClarification(deps, request),

    async listPending(request) {
      const listing = await store.listUnresolvedClarificationBundles({
        workspaceId: request.workspace_id,
        createdSince: request.created_since,
        limit: request.limit,
        cursor: request.cursor,
      });
      if (!listing.ok) return failure('bad_request', listing.message);
      return { ok: true, bundles: listing.page.bundles.map(toPendingBundle), next_cursor: listing.page.nextCursor };
    },

    async detach({ session_id: sessionId }) {
      if (!(await store.getSession(sessionId))) return failure('not_found', `session ${sessionId} does not exist`);
      const rows = await store.detachActiveClarifications(sessionId);
      await publishRows(rows);
      return { ok: true, session_id: sessionId, detached_message_ids: rows.map((r) => r.id), pending_ids: pendingIdsOf(rows) };
    },

    async expire({ session_id: sessionId }) {
      const expired: MessageRecord[] = [];
      let error: unknown;
      try {
        if (!(await store.getSession(sessionId))) return failure('not_found', `session ${sessionId} does not exist`);
        for (const pendingId of pendingIdsOf(await store.findActiveClarificationMessages(sessionId))) {
          // Best effort per bundle, as Kandev's canceller: one failure does not keep the others pending.
          try {
            expired.push(...(await store.expireActiveClarificationBundle(sessionId, pendingId)));
          } catch (err) {
            error ??= err;
          }
        }
      } catch (err) {
        error ??= err;
      }
      await publishRows(expired);
      // Thrown once what did expire is published; the endpoint replies to it as to any failure.
      if (error !== undefined) throw new Error(`could not expire every clarification of session ${sessionId}: ${(error as Error).message}`, { cause: error });
      return { ok: true, session_id: sessionId, expired_pending_ids: pendingIdsOf(expired), expired_message_ids: expired.map((r) => r.id) };
    },

    async guard({ session_id: sessionId }) {
      // A failure, thrown or not, still says blocked: the endpoint adds GUARD_FAILURE_FIELDS to each.
      if (!(await store.getSession(sessionId))) {
        return { ...failure('not_found', `session ${sessionId} does not exist`), blocked: true, live: true };
      }
      const rows = await store.findActiveClarificationMessages(sessionId);
      const live = rows.some(isLiveClarification);
      return { ok: true, session_id: sessionId, blocked: rows.length > 0, live, pending_ids: pendingIdsOf(rows) };
    },

    async turns({ session_id: sessionId }) {
      if (!(await store.getSession(sessionId))) return failure('not_found', `session ${sessionId} does not exist`);
      const [turns, current] = [await store.listVisibleTurns(sessionId), await store.getCurrentTurn(sessionId)];
      return { ok: true, session_id: sessionId, turns: turns.map(toTurnPayload), current_turn_id: current?.id ?? null };
    },

    async pendingActions({ task_id: taskId }) {
      const state = await store.loadTaskPendingState(taskId);
      if (!state) return failure('not_found', `task ${taskId} does not exist`);
      return {
        ok: true,
        task_id: taskId,
        workspace_id: state.workspaceId,
        pending_action: state.pendingAction,
        sessions: state.sessions.map((s) => ({ session_id: s.sessionId, state: s.state, is_primary: s.isPrimary, pending_action: s.pendingAction })),
      };
    },

    recoverPendingDeliveries: (options) => recoverPendingDeliveries(deps, options),
  };
}
