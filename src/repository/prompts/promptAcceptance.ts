import { insertPromptTranscript } from './promptTranscript.js';
import { atomically } from '../atomically.js';
import { claimAttachments } from '../attachments/attachments.js';
import { rawRows, type RepositoryContext } from '../context.js';
import { snapshotIn } from '../planComments/planComments.js';
import {
  badRequest,
  commentsChanged,
  conflict,
  notFound,
  unavailable,
  type BadRequest,
  type Conflict,
} from '../planComments/planCommentOutcomes.js';
import { toPlanCommentRecord, type AttachmentRecord, type PlanCommentRecord, type PlanCommentSnapshot } from '../planComments/planCommentRows.js';
import { attachmentSummaries, insertPromptReceipt } from './promptReceipts.js';
import { countWaitingQueuedPrompts } from './queuedPrompts.js';
import { priorAcceptance, replayOutcome } from './promptReplay.js';
import { promptRequestFingerprint } from '../requestFingerprint.js';
import type { PlanCommentSchema } from '../schema/planCommentTables.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { bumpCommentsRevision, forUpdate, planCommentsOf } from '../planComments/taskPlans.js';
import { formatPlanCommentPrompt, PLAN_COMMENT_LIMITS, utf8Length } from '../../turns/planCommentPrompt.js';
import {
  PROMPTABLE_SESSION_STATES,
  QUEUEABLE_SESSION_STATES,
  type AcceptPromptInput,
  type AcceptPromptResult,
  type PlanCommentRef,
} from './acceptedPrompt.js';

/**
 * The accepting transaction (seed 004; design sketch R8-R13, R22-R29, R34): ONE transaction that
 * re-validates the task, the target session and the referenced comments, expands exactly those
 * comment rows (read inside it) into the visible prompt, consumes them at their versions, claims the
 * attachments, and writes the prompt's durable receipt. Any failure writes nothing: an expected one
 * is decided before the first write or, after it, by throwing inside the transaction so it rolls
 * back (never by compensating). Two delivery kinds share it ("a common conditional-consumption
 * boundary"):
 *
 * - **direct** (`message.send`, Run): the session must be PROMPTABLE and in the state the preflight
 *   saw; the transaction also writes the prompt's reserved turn and its user message (id = caller
 *   id, next `prompt_seq`), linked from the receipt.
 * - **queued** (`queue.enqueue`): the session must be ACTIVE (not terminal); the session may hold at
 *   most `queueMaxPerSession` waiting queued prompts; the receipt (`delivery_kind = 'queued'`, the
 *   session's next position) is the queue entry, and the attachments are claimed with its id as
 *   `queue_id`. No turn, message or `prompt_seq`: the dispatcher writes those at reservation, with
 *   message id = receipt id.
 *
 * Locks, in Kandev's order: the task row, then the session's turn-write lock
 * (`lockSessionTurnWrites`), then rows (the session, the plan, the comments, the attachments);
 * PostgreSQL row locks are `SELECT ... FOR UPDATE`, none on SQLite, whose write transaction holds
 * the database's one write lock from BEGIN. The task admission lease, when the caller holds one,
 * is outermost and taken outside (ACCEPT runs on an ordinary pooled connection, never on the
 * lease's lock connection). On a context that already is a transaction it runs in a savepoint, so
 * a refusal after its first write undoes exactly its own writes.
 *
 * Caller-id replay: the prompt's receipt (and a direct prompt's message) take the caller id as
 * primary key. An earlier acceptance found under that id (before the locks, and again under the
 * task row lock, so a concurrent duplicate on the same task is seen once it committed) is compared
 * by request fingerprint: the same request is `replayed` (nothing written), another is
 * `caller_id_conflict`. A queued prompt delivered since answers from its transcript message.
 */

export * from './acceptedPrompt.js';

/** An expected refusal decided after the first write: thrown so the transaction rolls back, then returned. */
class AcceptanceRefused extends Error {
  constructor(readonly outcome: Conflict | BadRequest) {
    super(outcome.message);
  }
}

type Row = Record<string, unknown>;

function duplicates(values: readonly string[]): boolean {
  return new Set(values).size !== values.length;
}

function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/**
 * The writes keyed by the caller id. Its id taken although no acceptance under it was found under
 * the task lock means a row of another task's request (a reused caller id), committed meanwhile.
 */
async function underCallerId<T>(callerId: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw new AcceptanceRefused(conflict('caller_id_conflict', `caller id ${callerId} is taken by another request`, {}));
    throw err;
  }
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

/**
 * Deletes exactly the referenced comments at their versions; every one must go, or nothing does.
 * Returns the collection's new revision.
 */
async function consumeComments(tx: RepositoryContext, plan: { id: string; taskId: string }, refs: readonly PlanCommentRef[]): Promise<number> {
  const pairs = refs.map(() => '(id = ? AND version = ?)').join(' OR ');
  const deleted = await rawRows<{ id: string }>(
    tx,
    `DELETE FROM task_plan_comments WHERE task_id = ? AND plan_id = ? AND (${pairs}) RETURNING id`,
    [plan.taskId, plan.id, ...refs.flatMap((r) => [r.id, r.version])],
  );
  if (deleted.length !== refs.length) throw new AcceptanceRefused(commentsChanged({ taskId: plan.taskId, planId: plan.id, revision: 0, comments: [] }));
  return bumpCommentsRevision(tx, plan);
}

/**
 * The collection as the accepting transaction leaves it. With comments consumed, the plan row is
 * the one it locked and the revision the one it wrote; only the remaining comments are read.
 */
async function afterAcceptance(
  tx: RepositoryContext,
  schema: PlanCommentSchema,
  taskId: string,
  plan: { id: string; taskId: string } | undefined,
  revision: number | undefined,
): Promise<PlanCommentSnapshot | null> {
  if (schema.missingForComments.length > 0) return null;
  if (!plan || revision === undefined) return snapshotIn(tx, taskId);
  return { taskId, planId: plan.id, revision, comments: await planCommentsOf(tx, taskId, plan.id) };
}

/** Accepts one prompt of either kind, or says why not; see the module comment for what it checks and writes. */
export async function acceptPrompt(ctx: RepositoryContext, schema: PlanCommentSchema, input: AcceptPromptInput): Promise<AcceptPromptResult> {
  const refs = input.planCommentRefs ?? [];
  const attachmentIds = input.attachmentIds ?? [];
  if (duplicates(refs.map((r) => r.id))) return badRequest('duplicate_refs', 'a plan comment is referenced more than once');
  if (duplicates(attachmentIds)) return badRequest('duplicate_attachment_ids', 'an attachment is named more than once');
  if (attachmentIds.length > 0 && !input.attachmentOwnerId) return badRequest('attachment_owner_required', 'attachment ids need the owner that staged them');
  const missing = [
    ...schema.missingForPrompts,
    ...(refs.length > 0 ? schema.missingForComments : []),
    ...(attachmentIds.length > 0 ? schema.missingForAttachments : []),
  ];
  if (missing.length > 0 || !schema.receiptTable) return unavailable('accepting a prompt', missing);
  const receiptTable = schema.receiptTable;
  const model = input.model ?? '';
  const planMode = input.planMode ?? false;
  const kind = input.deliveryKind ?? 'direct';
  if (kind === 'queued' && input.queueMaxPerSession === undefined) throw new TypeError('a queued prompt needs queueMaxPerSession');
  const fingerprint = promptRequestFingerprint({
    callerId: input.callerId,
    target: input.target.kind === 'session' ? { sessionId: input.target.sessionId } : { taskId: input.target.taskId, requirePrimary: true },
    deliveryKind: kind,
    content: input.content,
    refs,
    attachmentIds,
    model,
    planMode,
  });

  let refusedTaskId: string | undefined;
  try {
    return await atomically(ctx, async (tx): Promise<AcceptPromptResult> => {
      // A replay needs no lock: the rows an acceptance wrote under this caller id keep their identity.
      const earlier = await priorAcceptance(tx, schema, input.callerId);
      if (earlier) return replayOutcome(tx, schema, input, earlier, fingerprint);

      const target = input.target;
      let taskId: string;
      if (target.kind === 'session') {
        const session = await tx.knex('task_sessions').select('task_id').where({ id: target.sessionId }).first();
        if (!session) return notFound('session_not_found', `session ${target.sessionId} does not exist`);
        taskId = String(session.task_id);
        if (target.taskId !== undefined && target.taskId !== taskId) return badRequest('session_not_in_task', `session ${target.sessionId} is not a session of task ${target.taskId}`);
      } else {
        taskId = target.taskId;
      }
      refusedTaskId = taskId;

      // 1. The task row: every acceptance of this task queues here (Kandev's guardActiveTaskTx).
      const task = (await rawRows<Row>(tx, `SELECT id, workspace_id, archived_at FROM tasks WHERE id = ?${forUpdate(tx)}`, [taskId]))[0];
      if (!task) return notFound('task_not_found', `task ${taskId} does not exist`);
      // Again under the lock: a concurrent request with this caller id on this task has committed by
      // now. SQLite's one writer held the database since BEGIN, so nothing can have committed since
      // the read above.
      if (!tx.dialect.singleWriter) {
        const concurrent = await priorAcceptance(tx, schema, input.callerId);
        if (concurrent) return replayOutcome(tx, schema, input, concurrent, fingerprint);
      }
      if (task.archived_at !== null && task.archived_at !== undefined) return conflict('task_inactive', `task ${taskId} is archived`, {});

      // 2. The target session, then its turn-write lock, then its row.
      let sessionId: string;
      if (target.kind === 'primary') {
        const primary = await primaryOf(tx, taskId);
        if (primary === undefined) {
          if (target.expectedSessionId !== undefined) return conflict('primary_session_changed', `task ${taskId} has no primary session any more`, { primarySessionId: null });
          return notFound('primary_session_not_found', `task ${taskId} has no primary session`);
        }
        if (target.expectedSessionId !== undefined && primary !== target.expectedSessionId) {
          return conflict('primary_session_changed', `the primary session of task ${taskId} is now ${primary}`, { primarySessionId: primary });
        }
        sessionId = primary;
      } else {
        sessionId = target.sessionId;
      }
      await lockSessionTurnWrites(tx, [sessionId]);
      const session = (await rawRows<Row>(tx, `SELECT id, task_id, state, is_primary FROM task_sessions WHERE id = ?${forUpdate(tx)}`, [sessionId]))[0];
      if (!session) return notFound('session_not_found', `session ${sessionId} does not exist`);
      if (String(session.task_id) !== taskId) return badRequest('session_not_in_task', `session ${sessionId} is not a session of task ${taskId}`);
      if (target.kind === 'primary' && Number(session.is_primary) !== 1) {
        // Promoted away between the read above and the row lock.
        const now = await primaryOf(tx, taskId);
        return conflict('primary_session_changed', `session ${sessionId} stopped being the primary of task ${taskId}`, { primarySessionId: now ?? null });
      }
      const state = String(session.state);
      const eligible =
        kind === 'queued'
          ? QUEUEABLE_SESSION_STATES.includes(state)
          : PROMPTABLE_SESSION_STATES.includes(state) && (input.expectedSessionState === undefined || state === input.expectedSessionState);
      if (!eligible) return conflict('session_unavailable', `session ${sessionId} is ${state}`, { state });

      // 3. The referenced comments, read here and only here.
      let plan: { id: string; taskId: string } | undefined;
      let comments: PlanCommentRecord[] = [];
      if (refs.length > 0) {
        const planRow = (await rawRows<Row>(tx, `SELECT id FROM task_plans WHERE task_id = ?${forUpdate(tx)}`, [taskId]))[0];
        if (!planRow) return commentsChanged(await snapshotIn(tx, taskId), `task ${taskId} has no plan, so none of its comments`);
        plan = { id: String(planRow.id), taskId };
        const ids = tx.dialect.inList('id', refs.map((r) => r.id));
        const rows = await rawRows<Row>(tx, `SELECT * FROM task_plan_comments WHERE task_id = ? AND plan_id = ? AND ${ids.sql}${forUpdate(tx)}`, [taskId, plan.id, ...ids.bindings]);
        comments = rows.map(toPlanCommentRecord);
        const byId = new Map(comments.map((c) => [c.id, c]));
        const stale = refs.filter((r) => byId.get(r.id)?.version !== r.version);
        if (stale.length > 0) {
          return commentsChanged(await snapshotIn(tx, taskId), `plan comments ${stale.map((r) => r.id).join(', ')} are gone or at another version`);
        }
      }

      // 4. The visible prompt, from those rows.
      const prompt = formatPlanCommentPrompt(
        comments.map((c) => ({ id: c.id, body: c.body, selected_text: c.selectedText, created_at: c.createdAt })),
        input.content,
      );
      if (prompt.trim() === '') return badRequest('empty_prompt', 'nothing to send: no content and no plan comment');
      if (utf8Length(prompt) > PLAN_COMMENT_LIMITS.promptMaxBytes) {
        return badRequest('prompt_too_large', `the expanded prompt is over ${PLAN_COMMENT_LIMITS.promptMaxBytes} bytes`);
      }

      // The limit, under the session's turn-write lock (every acceptance into the session takes it),
      // so two enqueues cannot both take the last place.
      let waiting = 0;
      if (kind === 'queued') {
        waiting = await countWaitingQueuedPrompts(tx, receiptTable, sessionId);
        const max = input.queueMaxPerSession!;
        if (waiting >= max) return conflict('queue_full', `session ${sessionId} already has ${waiting} queued prompts (at most ${max})`, { count: waiting, max });
      }

      // 5. Writes. From here an expected refusal throws, so everything rolls back.
      // The new revision, so the reply's snapshot needs only the comments re-read, not the plan.
      const revision = plan ? await consumeComments(tx, plan, refs) : undefined;
      let claimed: AttachmentRecord[] = [];
      if (attachmentIds.length > 0) {
        const claim = await claimAttachments(tx, {
          ids: attachmentIds,
          ownerId: input.attachmentOwnerId!,
          workspaceId: String(task.workspace_id),
          taskId,
          sessionId,
          // A queued prompt's message does not exist yet: the dispatcher fills it in at reservation.
          messageId: kind === 'direct' ? input.callerId : '',
          queueId: kind === 'queued' ? input.callerId : '',
        });
        if (!claim.ok) {
          throw new AcceptanceRefused(conflict('attachments_unavailable', `attachments ${claim.unavailable.join(', ')} cannot be claimed`, { attachmentIds: claim.unavailable }));
        }
        claimed = claim.claimed;
      }
      const refList = refs.map((r) => ({ id: r.id, version: r.version }));
      const accepted = {
        ok: true as const,
        replayed: false,
        taskId,
        sessionId,
        callerId: input.callerId,
        receiptId: input.callerId,
        deliveryKind: kind,
        delivery: 'pending' as const,
        content: prompt,
        consumedCommentIds: refs.map((r) => r.id),
        attachmentIds: claimed.map((a) => a.id),
      };
      if (kind === 'queued') {
        const receipt = await underCallerId(input.callerId, () =>
          insertPromptReceipt(tx, receiptTable, {
            id: input.callerId,
            deliveryKind: 'queued',
            sessionId,
            taskId,
            content: prompt,
            model,
            planMode,
            attachments: claimed,
            metadata: { client_queue_id: input.callerId, plan_comment_refs: refList, plan_comment_request_fingerprint: fingerprint },
            transcriptMessageId: null,
            transcriptTurnId: null,
          }),
        );
        return {
          ...accepted,
          messageId: null,
          turnId: null,
          promptSeq: null,
          queueId: input.callerId,
          position: receipt.position,
          queueCount: waiting + 1,
          snapshot: await afterAcceptance(tx, schema, taskId, plan, revision),
        };
      }
      const messageMetadata: Record<string, unknown> = {
        client_message_id: input.callerId,
        receipt_id: input.callerId,
        delivery_kind: 'direct',
        plan_comment_refs: refList,
        plan_comment_request_fingerprint: fingerprint,
        ...(claimed.length > 0 ? { attachments: attachmentSummaries(claimed) } : {}),
      };
      const { turnId, promptSeq } = await underCallerId(input.callerId, async () => {
        const transcript = await insertPromptTranscript(tx, { id: input.callerId, sessionId, taskId, content: prompt, authorId: input.authorId ?? '', metadata: messageMetadata });
        await insertPromptReceipt(tx, receiptTable, {
          id: input.callerId,
          deliveryKind: 'direct',
          sessionId,
          taskId,
          content: prompt,
          model,
          planMode,
          attachments: claimed,
          metadata: { client_message_id: input.callerId, plan_comment_refs: refList, plan_comment_request_fingerprint: fingerprint },
          transcriptMessageId: input.callerId,
          transcriptTurnId: transcript.turnId,
        });
        return transcript;
      });
      return {
        ...accepted,
        messageId: input.callerId,
        turnId,
        promptSeq,
        queueId: null,
        position: null,
        queueCount: null,
        snapshot: await afterAcceptance(tx, schema, taskId, plan, revision),
      };
    });
  } catch (err) {
    if (!(err instanceof AcceptanceRefused)) throw err;
    const outcome = err.outcome;
    // Rolled back: the collection as it is now, not as this transaction had changed it.
    if (outcome.code === 'conflict' && outcome.reason === 'plan_comments_changed' && refusedTaskId !== undefined) {
      return { ...outcome, snapshot: await snapshotIn(ctx, refusedTaskId) };
    }
    return outcome;
  }
}
