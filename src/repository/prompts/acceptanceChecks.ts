import { rawRows, type RepositoryContext } from '../context.js';
import { snapshotIn } from '../planComments/planComments.js';
import { badRequest, commentsChanged, conflict, notFound } from '../planComments/planCommentOutcomes.js';
import { toPlanCommentRecord, type PlanCommentRecord } from '../planComments/planCommentRows.js';
import type { PlanCommentSchema, ReceiptTable } from '../schema/planCommentTables.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { ACTIVE_SESSION_STATES, PROMPTABLE_SESSION_STATES } from '../../turns/sessionStates.js';
import type { AcceptPromptInput, AcceptPromptResult, DeliveryKind, PlanCommentRef } from './acceptedPrompt.js';
import { queueRoom } from './queueRoom.js';
import { utf8Length } from '../../turns/planCommentPrompt.js';
import { priorAcceptance, replayOutcome } from './promptReplay.js';
import { expandPrompt } from './promptExpansion.js';

/**
 * The accepting transaction's checks, one step per lock in Kandev's order (the task row, the
 * session's turn-write lock, then rows), each under its lock and all before the first write. A step
 * gives its value or the outcome that ends the acceptance; none writes.
 */

type Row = Record<string, unknown>;

/** What a step of the transaction may end it with: a refusal, or a replay of an earlier acceptance. */
export type Outcome = AcceptPromptResult;

/** A step's value, or the outcome that ends the acceptance (every outcome carries `ok`; no value does). */
export type Step<T extends object> = T | Outcome;

export const ended = <T extends object>(step: Step<T>): step is Outcome => 'ok' in step;

/** The request as checked and derived before any statement runs. */
export interface AcceptanceRequest {
  input: AcceptPromptInput;
  kind: DeliveryKind;
  refs: readonly PlanCommentRef[];
  attachmentIds: readonly string[];
  receiptTable: ReceiptTable;
  model: string;
  planMode: boolean;
  /** The request's identity, compared on a replay (requestFingerprint.ts). */
  fingerprint: string;
}

/** The referenced comments, read under the plan row lock; no plan when the prompt carries no refs. */
interface ReferencedComments {
  plan: { id: string; taskId: string } | undefined;
  comments: PlanCommentRecord[];
}

/** Everything the writes need, decided under the locks. */
export interface Admitted extends ReferencedComments {
  task: Row;
  taskId: string;
  sessionId: string;
  prompt: string;
  /** Queued only: the session's waiting queued prompts before this one. */
  waiting: number;
}

/** An earlier acceptance under the caller id, answered as a replay or a conflict; none: undefined. */
export async function replayOf(tx: RepositoryContext, schema: PlanCommentSchema, req: AcceptanceRequest): Promise<Outcome | undefined> {
  const earlier = await priorAcceptance(tx, schema, req.input.callerId);
  return earlier ? replayOutcome(tx, schema, req.input, earlier, req.fingerprint) : undefined;
}

/** The task the target names: a session's own task (which must be the one given), or the task itself. */
export async function taskOfTarget(tx: RepositoryContext, target: AcceptPromptInput['target']): Promise<Step<{ taskId: string }>> {
  if (target.kind !== 'session') return { taskId: target.taskId };
  const session = await tx.knex('task_sessions').select('task_id').where({ id: target.sessionId }).first();
  if (!session) return notFound('session_not_found', `session ${target.sessionId} does not exist`);
  const taskId = String(session.task_id);
  if (target.taskId !== undefined && target.taskId !== taskId)
    return badRequest('session_not_in_task', `session ${target.sessionId} is not a session of task ${target.taskId}`);
  return { taskId };
}

/** Step 1, the task row: every acceptance of this task queues here (Kandev's guardActiveTaskTx). */
async function lockTask(tx: RepositoryContext, schema: PlanCommentSchema, req: AcceptanceRequest, taskId: string): Promise<Step<{ task: Row }>> {
  const task = (await rawRows<Row>(tx, `SELECT id, workspace_id, archived_at FROM tasks WHERE id = ?${tx.dialect.forUpdate}`, [taskId]))[0];
  if (!task) return notFound('task_not_found', `task ${taskId} does not exist`);
  // Again under the lock: a concurrent request with this caller id on this task has committed by
  // now. SQLite's one writer held the database since BEGIN, so nothing can have committed since
  // the first read.
  if (!tx.dialect.singleWriter) {
    const concurrent = await replayOf(tx, schema, req);
    if (concurrent) return concurrent;
  }
  if (task.archived_at !== null && task.archived_at !== undefined) return conflict('task_inactive', `task ${taskId} is archived`, {});
  return { task };
}

/**
 * The task's primary session. Read without a row lock: the turn-write lock comes first (Kandev's
 * order), and the session row, locked after it, is checked to still be primary.
 */
async function primaryOf(tx: RepositoryContext, taskId: string): Promise<string | undefined> {
  const rows = await rawRows<{ id: string }>(
    tx,
    `SELECT id FROM task_sessions WHERE task_id = ? AND is_primary = 1 ORDER BY started_at, ${tx.dialect.binaryText('id')} LIMIT 1`,
    [taskId],
  );
  return rows[0]?.id;
}

/** The session a target names: exactly the one addressed, or the task's primary, still the one the preflight saw. */
async function targetSessionId(tx: RepositoryContext, target: AcceptPromptInput['target'], taskId: string): Promise<Step<{ sessionId: string }>> {
  if (target.kind !== 'primary') return { sessionId: target.sessionId };
  const primary = await primaryOf(tx, taskId);
  if (primary === undefined) {
    if (target.expectedSessionId !== undefined)
      return conflict('primary_session_changed', `task ${taskId} has no primary session any more`, { primarySessionId: null });
    return notFound('primary_session_not_found', `task ${taskId} has no primary session`);
  }
  if (target.expectedSessionId !== undefined && primary !== target.expectedSessionId) {
    return conflict('primary_session_changed', `the primary session of task ${taskId} is now ${primary}`, { primarySessionId: primary });
  }
  return { sessionId: primary };
}

/** Step 2, the target session, then its turn-write lock, then its row, in a state its delivery kind takes. */
async function lockSession(tx: RepositoryContext, req: AcceptanceRequest, taskId: string): Promise<Step<{ sessionId: string }>> {
  const target = req.input.target;
  const resolved = await targetSessionId(tx, target, taskId);
  if (ended(resolved)) return resolved;
  const { sessionId } = resolved;
  await lockSessionTurnWrites(tx, [sessionId]);
  const session = (await rawRows<Row>(tx, `SELECT id, task_id, state, is_primary FROM task_sessions WHERE id = ?${tx.dialect.forUpdate}`, [sessionId]))[0];
  if (!session) return notFound('session_not_found', `session ${sessionId} does not exist`);
  if (String(session.task_id) !== taskId) return badRequest('session_not_in_task', `session ${sessionId} is not a session of task ${taskId}`);
  if (target.kind === 'primary' && Number(session.is_primary) !== 1) {
    // Promoted away between the read above and the row lock.
    const now = await primaryOf(tx, taskId);
    return conflict('primary_session_changed', `session ${sessionId} stopped being the primary of task ${taskId}`, { primarySessionId: now ?? null });
  }
  const state = String(session.state);
  const eligible =
    req.kind === 'queued'
      ? ACTIVE_SESSION_STATES.includes(state)
      : PROMPTABLE_SESSION_STATES.includes(state) && (req.input.expectedSessionState === undefined || state === req.input.expectedSessionState);
  if (!eligible) return conflict('session_unavailable', `session ${sessionId} is ${state}`, { state });
  return { sessionId };
}

/** Step 3, the referenced comments, read here and only here, under the plan row lock, each at its version. */
async function lockReferencedComments(tx: RepositoryContext, refs: readonly PlanCommentRef[], taskId: string): Promise<Step<ReferencedComments>> {
  if (refs.length === 0) return { plan: undefined, comments: [] };
  const planRow = (await rawRows<Row>(tx, `SELECT id FROM task_plans WHERE task_id = ?${tx.dialect.forUpdate}`, [taskId]))[0];
  if (!planRow) return commentsChanged(await snapshotIn(tx, taskId), `task ${taskId} has no plan, so none of its comments`);
  const plan = { id: String(planRow.id), taskId };
  const ids = tx.dialect.inList(
    'id',
    refs.map((r) => r.id),
  );
  const rows = await rawRows<Row>(tx, `SELECT * FROM task_plan_comments WHERE task_id = ? AND plan_id = ? AND ${ids.sql}${tx.dialect.forUpdate}`, [
    taskId,
    plan.id,
    ...ids.bindings,
  ]);
  const comments = rows.map(toPlanCommentRecord);
  const byId = new Map(comments.map((c) => [c.id, c]));
  const stale = refs.filter((r) => byId.get(r.id)?.version !== r.version);
  if (stale.length > 0) {
    return commentsChanged(await snapshotIn(tx, taskId), `plan comments ${stale.map((r) => r.id).join(', ')} are gone or at another version`);
  }
  return { plan, comments };
}

/**
 * The queue's limits (queueRoom.ts), under the session's turn-write lock (every acceptance into the
 * session takes it), so two enqueues cannot both take the last place. A direct prompt counts nothing.
 */
async function roomFor(tx: RepositoryContext, req: AcceptanceRequest, sessionId: string, prompt: string): Promise<Step<{ waiting: number }>> {
  if (req.kind !== 'queued') return { waiting: 0 };
  return queueRoom(tx, req.receiptTable, sessionId, { bytes: utf8Length(prompt), max: req.input.queueMaxPerSession! });
}

/** Steps 1 to 4 and the queue's limit, in that order: every check under its lock, before any write. */
export async function admit(tx: RepositoryContext, schema: PlanCommentSchema, req: AcceptanceRequest, taskId: string): Promise<Step<Admitted>> {
  const locked = await lockTask(tx, schema, req, taskId);
  if (ended(locked)) return locked;
  const session = await lockSession(tx, req, taskId);
  if (ended(session)) return session;
  const referenced = await lockReferencedComments(tx, req.refs, taskId);
  if (ended(referenced)) return referenced;
  const expanded = expandPrompt(referenced.comments, req.input.content);
  if (ended(expanded)) return expanded;
  const room = await roomFor(tx, req, session.sessionId, expanded.prompt);
  if (ended(room)) return room;
  return { task: locked.task, taskId, sessionId: session.sessionId, ...referenced, prompt: expanded.prompt, waiting: room.waiting };
}
