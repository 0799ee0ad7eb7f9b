/**
 * The queue-edit row of `npm run bench:send`: one session with QUEUE_EDIT_ENTRIES waiting entries,
 * `queue.reorder` (the whole order reversed) and `queue.remove` (the head) through the bus and the
 * worker, against bare transactions of the same writes on another session of the same shape.
 *
 * Both sessions are paused (`queue_session_state.auto_run = 0`), so no dispatcher delivers an entry
 * and each keeps exactly QUEUE_EDIT_ENTRIES waiting: after each removal a new entry is queued at the
 * tail, untimed (through the endpoint for the endpoint's session, through the repository for the
 * bare one). The bare transactions are bench SQL for the statements the repository runs
 * (queueEdits.ts and queueWithdrawal.ts do not export them) and the repository's own revision bump
 * and outcome insert.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { PendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { beginOrJoin, rawRows, type RepositoryContext } from '../src/repository/context.js';
import type { PlanCommentSchema, ReceiptTable } from '../src/repository/schema/planCommentTables.js';
import { recordPromptOutcome } from '../src/repository/prompts/promptOutcomes.js';
import { createPromptStore } from '../src/repository/prompts/promptStore.js';
import { bumpQueueRevision } from '../src/repository/prompts/queueRevision.js';
import { WrongAnswerError, expectFields, timeEach, type Timed } from './harness.js';
import { seedSession } from './seed/fixtures.js';
import { QUEUE_MAX_PER_SESSION } from './sendQueueParts.js';
import { untilWorkerIdle, type SendWorker } from './sendWorker.js';

/** Waiting entries of each measured session: as many as the bench's worker lets a session hold. */
export const QUEUE_EDIT_ENTRIES = QUEUE_MAX_PER_SESSION;
const TYPED = 'A queued prompt waiting its turn.';

/** A paused session and its waiting entries, in queue order, with the positions they hold. */
export interface WaitingQueue {
  taskId: string;
  sessionId: string;
  entries: Array<{ id: string; position: number }>;
}

/** A task with one IDLE primary session, paused, holding `QUEUE_EDIT_ENTRIES` entries queued through the repository. */
export async function seedWaitingQueue(ctx: RepositoryContext, schema: PlanCommentSchema & { receiptTable: ReceiptTable }): Promise<WaitingQueue> {
  const { taskId, sessionId } = await seedSession(ctx, { state: 'IDLE', workspaceId: 'bench' });
  const paused = await createPromptStore(ctx, schema).setAutoRun(sessionId, false);
  if (!paused.ok) throw new WrongAnswerError(`pausing session ${sessionId}: ${JSON.stringify(paused)}`);
  const queue: WaitingQueue = { taskId, sessionId, entries: [] };
  for (let i = 0; i < QUEUE_EDIT_ENTRIES; i++) queue.entries.push(await queueAtTail(ctx, schema, queue));
  return queue;
}

/** One entry queued through the repository (no lease: it carries no comments), its id and position. */
async function queueAtTail(ctx: RepositoryContext, schema: PlanCommentSchema, queue: WaitingQueue): Promise<{ id: string; position: number }> {
  const accepted = await createPromptStore(ctx, schema).acceptPrompt({
    callerId: randomUUID(),
    target: { kind: 'session', sessionId: queue.sessionId, taskId: queue.taskId },
    deliveryKind: 'queued',
    queueMaxPerSession: QUEUE_EDIT_ENTRIES,
    content: TYPED,
  });
  if (!accepted.ok || accepted.replayed || accepted.position === null)
    throw new WrongAnswerError(`queueing on ${queue.sessionId}: ${JSON.stringify(accepted)}`);
  return { id: accepted.receiptId, position: accepted.position };
}

/** The reversed order with the positions the entries hold now, dealt out ascending (what queue.reorder writes). */
function reversed(entries: WaitingQueue['entries']): WaitingQueue['entries'] {
  const positions = entries.map((e) => e.position).sort((a, b) => a - b);
  return [...entries].reverse().map((e, i) => ({ id: e.id, position: positions[i]! }));
}

/** The session's receipts in queue order, read untimed, to check what a bare transaction wrote. */
async function idsInOrder(ctx: RepositoryContext, table: ReceiptTable, queue: WaitingQueue): Promise<string[]> {
  const rows = await rawRows<{ id: string }>(ctx, `SELECT id FROM ${table} WHERE session_id = ? ORDER BY position, id`, [queue.sessionId]);
  return rows.map((r) => String(r.id));
}

function expectOrder(what: string, got: readonly string[], queue: WaitingQueue): void {
  const want = queue.entries.map((e) => e.id);
  if (got.length !== want.length || got.some((id, i) => id !== want[i])) throw new WrongAnswerError(`${what}: the queue is not in the order written`);
}

/**
 * `count` bare reorders, one at a time: one transaction of the one UPDATE ... CASE that rewrites
 * every position, then the queue revision's bump. No locks, no reads, no checks (the order is
 * checked afterwards, untimed).
 */
export function bareReorders(ctx: RepositoryContext, table: ReceiptTable, queue: WaitingQueue, count: number): Promise<Timed> {
  return timeEach(Array.from({ length: count }), async () => {
    const order = reversed(queue.entries);
    const t0 = performance.now();
    await beginOrJoin(ctx, async (tx) => {
      const cases = order.map(() => 'WHEN ? THEN CAST(? AS INTEGER)').join(' ');
      const ids = tx.dialect.inList(
        'id',
        order.map((e) => e.id),
      );
      await rawRows(tx, `UPDATE ${table} SET position = CASE id ${cases} END WHERE session_id = ? AND ${ids.sql}`, [
        ...order.flatMap((e) => [e.id, e.position]),
        queue.sessionId,
        ...ids.bindings,
      ]);
      await bumpQueueRevision(tx, queue.sessionId);
    });
    const ms = performance.now() - t0;
    queue.entries = order;
    expectOrder('bare reorder', await idsInOrder(ctx, table, queue), queue);
    return ms;
  });
}

/**
 * `count` bare removals of the head, one at a time: one transaction of the receipt's DELETE, the
 * outcome a caller-id replay reads, and the revision's bump; then, untimed, a check and an entry at
 * the tail.
 */
export function bareRemoves(
  ctx: RepositoryContext,
  schema: PlanCommentSchema & { receiptTable: ReceiptTable },
  queue: WaitingQueue,
  count: number,
): Promise<Timed> {
  return timeEach(Array.from({ length: count }), async () => {
    const head = queue.entries[0]!;
    const t0 = performance.now();
    await beginOrJoin(ctx, async (tx) => {
      await rawRows(tx, `DELETE FROM ${schema.receiptTable} WHERE id = ?`, [head.id]);
      await recordPromptOutcome(tx, {
        ...{ id: head.id, sessionId: queue.sessionId, taskId: queue.taskId, deliveryKind: 'queued', status: 'removed', reason: '', fingerprint: '' },
        detail: { position: head.position, consumed_comment_ids: [], returned_comment_ids: [], dropped_comment_ids: [], attachment_ids: [] },
      });
      await bumpQueueRevision(tx, queue.sessionId);
    });
    const ms = performance.now() - t0;
    queue.entries = queue.entries.slice(1);
    expectOrder('bare remove', await idsInOrder(ctx, schema.receiptTable, queue), queue);
    queue.entries.push(await queueAtTail(ctx, schema, queue));
    return ms;
  });
}

type EndpointEditDeps = Pick<SendWorker, 'client' | 'worker' | 'jsm'>;

/** The queue as `queue.list` shows it: its revision, and the entries in order; anything else is a wrong answer. */
async function listed(client: PendingProjectorClient, queue: WaitingQueue): Promise<{ revision: number; ids: string[] }> {
  const reply = await client.listQueue({ session_id: queue.sessionId });
  if (!reply.ok) throw new WrongAnswerError(`queue.list of ${queue.sessionId}: ${JSON.stringify(reply)}`);
  expectFields(`queue.list of ${queue.sessionId}`, { count: reply.count, auto_run: reply.auto_run }, { count: QUEUE_EDIT_ENTRIES, auto_run: false });
  return { revision: reply.revision, ids: reply.entries.map((e) => e.id) };
}

/** `count` queue.reorder requests, one at a time on an idle worker, each reversing the whole order at the current revision. */
export async function endpointReorders(deps: EndpointEditDeps, queue: WaitingQueue, count: number): Promise<Timed> {
  let { revision, ids } = await listed(deps.client, queue);
  return timeEach(Array.from({ length: count }), async () => {
    const order = [...ids].reverse();
    const t0 = performance.now();
    const reply = await deps.client.reorderQueue({ session_id: queue.sessionId, queue_ids: order, revision });
    const ms = performance.now() - t0;
    const got = reply.ok ? reply.entries.map((e) => e.id) : [];
    const sameOrder = got.length === order.length && got.every((id, i) => id === order[i]);
    expectFields(
      `queue.reorder of ${queue.sessionId}`,
      { ok: reply.ok, same_order: sameOrder, moved: reply.ok && reply.revision === revision + 1 },
      {
        ok: true,
        same_order: true,
        moved: true,
      },
    );
    if (reply.ok) [revision, ids] = [reply.revision, order];
    await untilWorkerIdle(deps);
    return ms;
  });
}

/** `count` queue.remove requests of the head, one at a time on an idle worker; after each, untimed, queue.enqueue at the tail. */
export async function endpointRemoves(deps: EndpointEditDeps, queue: WaitingQueue, count: number): Promise<Timed> {
  let { ids } = await listed(deps.client, queue);
  return timeEach(Array.from({ length: count }), async () => {
    const head = ids[0]!;
    const t0 = performance.now();
    const reply = await deps.client.removeQueueEntry({ session_id: queue.sessionId, queue_id: head });
    const ms = performance.now() - t0;
    const removed = reply.ok ? reply.removed.map((r) => r.queue_id).join(',') : '';
    expectFields(`queue.remove of ${head}`, { ...reply, removed }, { ok: true, removed: head, count: QUEUE_EDIT_ENTRIES - 1 });
    const callerId = randomUUID();
    const added = await deps.client.enqueue({ session_id: queue.sessionId, caller_id: callerId, content: TYPED });
    expectFields(`queue.enqueue on ${queue.sessionId}`, added, { ok: true, replayed: false, delivery_kind: 'queued', queue_id: callerId });
    ids = [...ids.slice(1), callerId];
    await untilWorkerIdle(deps);
    return ms;
  });
}
