import { randomUUID } from 'node:crypto';
import pRetry from 'p-retry';
import type { Logger } from 'pino';
import { z } from 'zod';
import { CLARIFICATION_PRIMARY_ANSWERED, CLARIFICATION_STALE_DISMISSED } from '../../contract/kandevEvents.js';
import { isSubjectToken } from '../../contract/subjects.js';
import type { ClaimOutcome } from '../../repository/clarifications/clarificationClaims.js';
import type { ClarificationStore } from '../../repository/clarifications/clarificationStore.js';
import type { MessageRecord } from '../../repository/rowMapping.js';
import { isTruthyFlag } from '../../turns/lifecycleTurn.js';
import type { ClarificationDeliveryPayload } from '../../contract/clarificationPayloads.js';
import type { ClarificationDelivery, EventPublisher, RefreshSummary } from './clarificationPorts.js';
import { messageUpdatedEvents } from '../messageUpdatedEvents.js';
import { describeRequestIssues } from '../../contract/describeRequestIssues.js';
import { inspectBundle, validateOutcome, type BundleQuestionView, type NormalizedOutcome } from './outcomeValidation.js';
import { publishOrRefresh, refreshThenPublish } from '../publishOrRefresh.js';
import { primaryAnsweredData } from './primaryAnsweredData.js';
import { recordedOutcome } from './recordedOutcome.js';
import { failure, type ReplyFailure, type RespondReply, type RespondResult } from '../../contract/replies.js';
import { respondRequestSchema, type ParsedRespondRequest, type RespondRequest } from '../../contract/requests.js';

/**
 * clarification.respond (ADR 0001, "Response handling"):
 *
 * 1. identity: the bundle's rows by pending id, on any turn (unknown or parent-question: not_found);
 * 2. shape and outcome validation against the bundle's questions, before any write;
 * 3. the atomic current-turn claim, committed BEFORE any delivery;
 * 4. lost claim: replay the recorded outcome if this is a retry of it, else conflict (no write);
 * 5. won claim: the live waiter (its `{ok: true}` is durable receipt), or, with no waiter, a
 *    rejection persisted without resume or an answer published as a JetStream resume command that
 *    must be acknowledged within the deadline; success finalises the rows and publishes events;
 * 6. failure before acceptance: restore exactly the claimed rows (only while their turn is current
 *    and the session non-terminal), refresh the summary synchronously by compare-and-set, and only
 *    then reply `retryable`; a refresh that did not commit replies `internal`. Failure after
 *    acceptance replies `internal` and never delivers again.
 */

export interface RespondDeps {
  /** Where the bundle's rows are read and claimed (`createClarificationStore(ctx)`). */
  store: ClarificationStore;
  delivery: ClarificationDelivery;
  events: EventPublisher;
  refreshSummary: RefreshSummary;
  /** Live-waiter confirmation timeout and detached acceptance deadline. */
  respondDeadlineMs: number;
  logger: Logger;
  /** Claim ids (tests pin them); random UUIDs by default. */
  newClaimId?: () => string;
}

type Claimed = {
  pendingId: string;
  claimId: string;
  sessionId: string;
  taskId: string;
  outcome: NormalizedOutcome;
  rows: MessageRecord[];
};

/**
 * A finalise that fails after the agent or the bus accepted the response is retried twice, after
 * 50 ms then 250 ms (a lock or connection blip), before the reply says `internal`: the response is
 * never delivered again, so only finalising it is left, and recovery does that later if this fails.
 * (p-retry does not retry a TypeError: a bug, not a blip.)
 */
const FINALIZE_RETRY = { retries: 2, minTimeout: 50, factor: 5, randomize: false } as const;

type Prepared = { rows: MessageRecord[]; questions: BundleQuestionView[]; outcome: NormalizedOutcome; sessionId: string; taskId: string };

/** Steps 1 and 2: identity, bundle shape and outcome validation; nothing is written. */
async function prepare(deps: RespondDeps, request: ParsedRespondRequest): Promise<Prepared | ReplyFailure> {
  const pendingId = request.pending_id;
  const rows = await deps.store.findMessagesByPendingId(pendingId);
  if (!rows.some((r) => r.type === 'clarification_request') || rows.some((r) => isTruthyFlag(r.metadata.parent_question))) {
    return failure('not_found', `clarification ${pendingId} does not exist`);
  }
  const bundle = inspectBundle(rows);
  if (!bundle.ok) return failure('conflict', `clarification ${pendingId} cannot be answered: ${bundle.reason}`);
  const validation = validateOutcome(bundle.questions, request);
  if (!validation.ok) return failure('bad_request', validation.message);
  const sessionId = rows[0]!.sessionId;
  if (!isSubjectToken(sessionId)) return failure('internal', `session id ${JSON.stringify(sessionId)} cannot name an agent subject`);
  let taskId = rows.find((r) => r.taskId !== '')?.taskId;
  if (taskId === undefined) taskId = (await deps.store.getSession(sessionId))?.taskId;
  if (!taskId) return failure('not_found', `clarification ${pendingId} belongs to no task`);
  return { rows, questions: bundle.questions, outcome: validation.outcome, sessionId, taskId };
}

/**
 * Performs one respond: every expected outcome is a reply value; a database or bus failure before the
 * claim committed rejects, and the endpoint answers it by its reply policy (a retry is safe).
 */
export async function respondToClarification(deps: RespondDeps, input: RespondRequest): Promise<RespondReply> {
  const log = deps.logger.child({ component: 'clarification-respond' });
  const parsed = respondRequestSchema.safeParse(input);
  if (!parsed.success) return failure('bad_request', describeRequestIssues(parsed.error));
  const pendingId = parsed.data.pending_id;
  const prepared = await prepare(deps, parsed.data);
  if ('ok' in prepared) return prepared;
  const { outcome, sessionId, taskId } = prepared;

  // A claim that throws is answered by the endpoint's reply policy; a retry learns its outcome.
  const claim = await deps.store.claimClarificationBundle(pendingId, toClaimOutcome(outcome));
  if (!claim.claimed && claim.reason === 'CLAIM_INTEGRITY') {
    log.error({ pendingId, reason: claim.message }, 'clarification claim failed');
    return failure('internal', `clarification ${pendingId}: ${claim.message}`);
  }

  if (!claim.claimed) {
    const current = await deps.store.findMessagesByPendingId(pendingId);
    const recorded = recordedOutcome(current, prepared.questions, outcome);
    if (!recorded.replay) return failure('conflict', `clarification ${pendingId}: ${recorded.reason}`);
    return {
      ok: true,
      pending_id: pendingId,
      session_id: sessionId,
      task_id: taskId,
      claimed: false,
      status: recorded.status,
      answers: recorded.answers,
      reject_reason: recorded.rejectReason,
      responded_at: recorded.respondedAt,
      delivery: null,
    };
  }

  const claimed: Claimed = {
    pendingId,
    claimId: (deps.newClaimId ?? randomUUID)(),
    sessionId,
    taskId,
    outcome,
    rows: claim.rows,
  };
  return deliverClaim(deps, log, claimed);
}

function toClaimOutcome(outcome: NormalizedOutcome): ClaimOutcome {
  if (outcome.status === 'rejected') return { status: 'rejected', reason: outcome.reason };
  return { status: 'answered', answers: new Map(outcome.answers.map((a) => [a.question_id, a])) };
}

function payloadOf(claimed: Claimed): ClarificationDeliveryPayload {
  const { outcome } = claimed;
  return {
    pending_id: claimed.pendingId,
    claim_id: claimed.claimId,
    session_id: claimed.sessionId,
    task_id: claimed.taskId,
    clarification_turn_id: claimed.rows[0]!.turnId,
    status: outcome.status,
    answers: outcome.status === 'answered' ? outcome.answers : [],
    rejected: outcome.status === 'rejected',
    reject_reason: outcome.status === 'rejected' ? outcome.reason : '',
    responded_at: claimed.rows[0]!.updatedAt,
  };
}

async function deliverClaim(deps: RespondDeps, log: Logger, claimed: Claimed): Promise<RespondReply> {
  const payload = payloadOf(claimed);
  const live = await deps.delivery
    .deliverToLiveWaiter(claimed.sessionId, payload, deps.respondDeadlineMs)
    .catch((err: Error) => ({ outcome: 'unconfirmed' as const, reason: err.message }));
  if (live.outcome === 'confirmed') return finishDelivered(deps, log, claimed, payload, 'live');
  if (live.outcome === 'unconfirmed') return restoreAfterFailure(deps, log, claimed, `the live waiter did not confirm receipt (${live.reason})`);
  if (claimed.outcome.status === 'rejected') return finishDelivered(deps, log, claimed, payload, 'none');
  const resume = await deps.delivery
    .publishResume(claimed.sessionId, payload, deps.respondDeadlineMs)
    .catch((err: Error) => ({ accepted: false as const, reason: err.message }));
  if (resume.accepted) return finishDelivered(deps, log, claimed, payload, 'resume');
  return restoreAfterFailure(deps, log, claimed, `the resume command was not acknowledged within ${deps.respondDeadlineMs} ms (${resume.reason})`);
}

async function finishDelivered(
  deps: RespondDeps,
  log: Logger,
  claimed: Claimed,
  payload: ClarificationDeliveryPayload,
  delivery: 'live' | 'resume' | 'none',
): Promise<RespondReply> {
  const { pendingId, taskId, sessionId } = claimed;
  let finalized: MessageRecord[];
  try {
    const ids = claimed.rows.map((r) => r.id);
    finalized = await pRetry(() => deps.store.finalizeClarificationDelivery(ids), FINALIZE_RETRY);
  } catch (err) {
    // Accepted by the agent or the bus, so never delivered again; recovery finalises it later.
    log.error({ pendingId, delivery, err }, 'response accepted but not finalised');
    return failure('internal', `the response was accepted (${delivery}) but could not be finalised: ${(err as Error).message}; it will not be delivered again`);
  }
  const events = messageUpdatedEvents(finalized);
  const turnId = payload.clarification_turn_id;
  if (delivery === 'live') {
    events.push({ type: CLARIFICATION_PRIMARY_ANSWERED, data: primaryAnsweredData(claimed.rows, payload) });
  } else if (delivery === 'none') {
    events.push({
      type: CLARIFICATION_STALE_DISMISSED,
      data: { pending_id: pendingId, session_id: sessionId, task_id: taskId, clarification_turn_id: turnId, reject_reason: payload.reject_reason },
    });
  }
  await publishOrRefresh(deps, log, taskId, events);
  log.info({ pendingId, sessionId, delivery, status: payload.status }, 'clarification response delivered');
  const result: RespondResult = {
    pending_id: pendingId,
    session_id: sessionId,
    task_id: taskId,
    claimed: true,
    status: payload.status,
    answers: payload.answers,
    reject_reason: payload.reject_reason,
    responded_at: payload.responded_at,
    delivery,
  };
  return { ok: true, ...result };
}

async function restoreAfterFailure(deps: RespondDeps, log: Logger, claimed: Claimed, reason: string): Promise<RespondReply> {
  const { pendingId, taskId } = claimed;
  const ids = claimed.rows.map((r) => r.id);
  let restore;
  try {
    restore = await deps.store.restoreClaimedClarifications(pendingId, claimed.outcome.status, ids);
  } catch (err) {
    log.error({ pendingId, reason, err }, 'delivery failed and the claim could not be restored');
    return failure('internal', `${reason}; restoring the clarification failed (${(err as Error).message}), so it is not retryable until recovered`);
  }
  if (!restore.restored) {
    let abandoned: MessageRecord[];
    try {
      abandoned = await deps.store.abandonClaimedClarifications(ids);
    } catch (err) {
      log.error({ pendingId, reason, err }, 'delivery failed and the unrestorable claim could not be released');
      return failure('internal', `${reason}; the clarification is no longer active and could not be released (${(err as Error).message})`);
    }
    await publishOrRefresh(deps, log, taskId, messageUpdatedEvents(abandoned));
    log.warn({ pendingId, reason }, 'delivery failed after the clarification stopped being active');
    return failure(
      'conflict',
      `${reason}; meanwhile the clarification stopped being active (superseded turn or terminal session), so the response was not delivered`,
    );
  }
  // Retryability is acknowledged only once the summary shows the restored question again.
  const refresh = await refreshThenPublish(deps, log, taskId, messageUpdatedEvents(restore.rows));
  if (!refresh.refreshed) {
    log.error({ pendingId, taskId, reason, err: refresh.error }, 'clarification restored but the summary refresh did not commit');
    return failure(
      'internal',
      `${reason}; the clarification is pending again but the task summary could not be refreshed (${refresh.error.message}), so the response is not acknowledged as retryable`,
    );
  }
  log.warn({ pendingId, reason }, 'clarification delivery failed; restored for a retry');
  return failure('retryable', `${reason}; the clarification is pending again and the response can be retried`);
}
