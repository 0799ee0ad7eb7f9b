/**
 * The parts of `npm run bench:send` that are not the endpoint: the bare transaction (the writes of
 * an accepted 5-comment send and nothing else), the lease alone, and the repository-level send
 * (the lease around acceptPrompt, no bus), and the removal of the receipts those leave behind.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { messageAdmissionKey, lockSessionKeys, taskAdmissionKey, unlockSessionKeys } from '../src/repository/admission/advisoryLocks.js';
import type { TaskAdmission } from '../src/repository/admission/taskAdmission.js';
import { rawRows, beginOrJoin, type RepositoryContext } from '../src/repository/context.js';
import type { Database } from '../src/repository/database.js';
import { withReservedConnection } from '../src/repository/driver/reservedConnection.js';
import type { PromptStore } from '../src/repository/prompts/promptStore.js';
import { insertPromptReceipt } from '../src/repository/prompts/promptReceipts.js';
import { insertPromptTranscript } from '../src/repository/prompts/promptTranscript.js';
import type { ReceiptTable } from '../src/repository/schema/planCommentTables.js';
import { bumpCommentsRevision } from '../src/repository/planComments/taskPlans.js';
import { WrongAnswerError, timeEach, type Timed } from './harness.js';
import type { SeededCommentedTask } from './seed/fixtures.js';

/**
 * The writes acceptPrompt makes for an accepted send of `task`'s comments, in one transaction, with
 * none of its reads, locks or checks: the 5 comment rows deleted at their versions, the revision
 * bumped, the reserved turn, the prompt sequence number, the user message, the direct receipt.
 * Repository functions where one exists (bumpCommentsRevision, insertPromptTranscript,
 * insertPromptReceipt); the comment delete is bench SQL, the statement acceptPrompt runs
 * (promptAcceptance.ts does not export it).
 */
export async function bareAcceptance(ctx: RepositoryContext, receiptTable: ReceiptTable, task: SeededCommentedTask, prompt: string): Promise<void> {
  const callerId = randomUUID();
  await beginOrJoin(ctx, async (tx) => {
    const pairs = task.refs.map(() => '(id = ? AND version = ?)').join(' OR ');
    const deleted = await rawRows<{ id: string }>(tx, `DELETE FROM task_plan_comments WHERE task_id = ? AND plan_id = ? AND (${pairs}) RETURNING id`, [
      task.taskId,
      task.planId,
      ...task.refs.flatMap((r) => [r.id, r.version]),
    ]);
    if (deleted.length !== task.refs.length)
      throw new WrongAnswerError(`bare: deleted ${deleted.length} of ${task.refs.length} comments of task ${task.taskId}`);
    await bumpCommentsRevision(tx, { id: task.planId, taskId: task.taskId });
    const refs = task.refs.map((r) => ({ id: r.id, version: r.version }));
    const metadata = {
      client_message_id: callerId,
      receipt_id: callerId,
      delivery_kind: 'direct',
      plan_comment_refs: refs,
      plan_comment_request_fingerprint: 'bench',
    };
    const transcript = await insertPromptTranscript(tx, {
      id: callerId,
      sessionId: task.sessionId,
      taskId: task.taskId,
      content: prompt,
      authorId: '',
      metadata,
    });
    await insertPromptReceipt(tx, receiptTable, {
      id: callerId,
      deliveryKind: 'direct',
      sessionId: task.sessionId,
      taskId: task.taskId,
      content: prompt,
      model: '',
      planMode: false,
      attachments: [],
      metadata: { client_message_id: callerId, plan_comment_refs: refs, plan_comment_request_fingerprint: 'bench' },
      transcriptMessageId: callerId,
      transcriptTurnId: transcript.turnId,
    });
  });
}

/**
 * Deletes every prompt receipt in the database, returning how many there were: the direct receipts
 * the bare transaction and the repository send leave (nothing delivers them without a worker).
 * Called before the worker starts: its dispatcher would otherwise deliver each of them to the
 * agent stream in the background, during the figures taken through the bus.
 */
export async function discardReceipts(ctx: RepositoryContext, receiptTable: ReceiptTable): Promise<number> {
  return (await rawRows(ctx, `DELETE FROM ${receiptTable} RETURNING id`)).length;
}

/**
 * The lease alone, as a send takes it (the task's key and the caller id's), around nothing: the
 * in-process mutex on both dialects; on PostgreSQL also the lock-connection permit, reserving a
 * pooled connection, the advisory locks and their unlock.
 */
export function leaseAlone(admission: TaskAdmission, count: number): Promise<Timed> {
  return timeEach(
    Array.from({ length: count }, () => ({ taskId: randomUUID(), callerId: randomUUID() })),
    async ({ taskId, callerId }) => {
      const outcome = await admission.withLease(taskId, async () => undefined, { callerId });
      if (!outcome.ok) throw new WrongAnswerError(`lease of a fresh task timed out: ${JSON.stringify(outcome)}`);
    },
  );
}

/**
 * PostgreSQL: the advisory lock and unlock of a send's two keys on ONE connection reserved once
 * for the whole loop (what the lease costs on the server, without the pool): `pg_try_advisory_lock`
 * per key, then one statement unlocking both, so three round trips.
 */
export async function advisoryLockRoundTrips(db: Database, count: number): Promise<Timed> {
  return withReservedConnection(db.knex, db.dialect, (connection) =>
    timeEach(
      Array.from({ length: count }, () => [taskAdmissionKey(randomUUID()), messageAdmissionKey(randomUUID())]),
      async (keys) => {
        if ((await lockSessionKeys(connection, keys, performance.now() + 5_000)) !== 'locked')
          throw new WrongAnswerError('advisory lock on fresh keys timed out');
        if (!(await unlockSessionKeys(connection, keys))) throw new WrongAnswerError('advisory unlock returned false');
      },
    ),
  );
}

/** The send without the bus: the lease around acceptPrompt, as the endpoint's service would hold it. */
export async function repositorySend(admission: TaskAdmission, store: PromptStore, task: SeededCommentedTask, content: string): Promise<void> {
  const callerId = randomUUID();
  const outcome = await admission.withLease(
    task.taskId,
    () => store.acceptPrompt({ callerId, target: { kind: 'session', sessionId: task.sessionId }, content, planCommentRefs: task.refs }),
    { callerId },
  );
  if (!outcome.ok) throw new WrongAnswerError(`repository send on task ${task.taskId}: lease timed out`);
  const accepted = outcome.value;
  if (!accepted.ok || accepted.replayed || accepted.consumedCommentIds.length !== task.refs.length) {
    throw new WrongAnswerError(`repository send on task ${task.taskId}: ${JSON.stringify(accepted)}`);
  }
}
