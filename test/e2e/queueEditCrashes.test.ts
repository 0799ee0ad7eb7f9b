import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterEach, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { rawRows } from '../../src/repository/context.js';
import { runCli } from '../support/cliProcess.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { createCommentsThrough, stageThrough } from '../support/clientFixtures.js';
import { seedPlanTask, type PlanTask } from '../support/planComments.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

/**
 * kill -9 of a `pending-projector worker` process inside the transaction of a `queue.remove` and of
 * a `queue.reorder`: a test-only failpoint (armed through test/support/failpointWorker.ts) hangs the
 * worker after every write of the change and before its COMMIT, the test kills it there, and a
 * second worker on the same database takes over. Afterwards the queue is the old one as a whole
 * (entries, order, versions, revision, the comment collection, attachments, outcomes), never part
 * of the change; the same request then applies in full; `verify` finds no drift either time.
 * Sessions are RUNNING, so no dispatcher delivers an entry meanwhile.
 */
async function harness(dialect: DialectName) {
  const t: TestDatabase = await openTestDatabase(dialect, undefined, { file: true });
  cleanups.push(() => t.close());
  const nc: NatsConnection = await connectTestNats();
  cleanups.push(() => nc.drain());
  const prefix = uniquePrefix(`queue_crash_${dialect}`);
  cleanups.push(() => deleteTopology(nc, prefix));
  const client: PendingProjectorClient = createPendingProjectorClient(nc, { prefix, timeoutMs: 20_000 });
  // On PostgreSQL the workers name their connections, so the test can find the hung transaction among the server's.
  const applicationName = `pp_queue_crash_${randomUUID().slice(0, 8)}`;
  const databaseUrl = dialect === 'postgres' ? `${t.url}${t.url.includes('?') ? '&' : '?'}application_name=${applicationName}` : t.url;

  async function start(failpoints?: string): Promise<WorkerProcess> {
    const worker = await spawnWorker(
      { DATABASE_URL: databaseUrl, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, BOOT_RECONCILE: 'false', DISPATCH_POLL_MS: '100' },
      { failpoints },
    );
    cleanups.push(() => worker.stop());
    return worker;
  }
  const reached = (worker: WorkerProcess, name: string) =>
    eventually(() => (worker.output().includes(`failpoint reached ${name}`) ? true : undefined), 20_000, `failpoint ${name} in the worker log`);

  /** A RUNNING session with `n` waiting entries; the first two carry a plan comment each, the first an attachment too. */
  async function seedQueue(n: number) {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const comments = await createCommentsThrough(client, task, 2);
    const { id: attachmentId, owner } = await stageThrough(client, task.workspaceId);
    const requests = [];
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const extra =
        i === 0
          ? { plan_comment_refs: [{ id: comments[0]!.id, version: comments[0]!.version }], attachment_ids: [attachmentId], attachment_owner_id: owner }
          : i === 1
            ? { plan_comment_refs: [{ id: comments[1]!.id, version: comments[1]!.version }] }
            : {};
      const request = { session_id: task.sessionId, caller_id: randomUUID(), content: `prompt ${i}`, ...extra };
      const reply = await client.enqueue(request);
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      requests.push(request);
      ids.push(reply.queue_id!);
    }
    return { task, ids, requests, commentIds: comments.map((c) => c.id), attachmentId };
  }

  /** Everything a removal or a reorder writes, for one task's session, in a stable order. */
  async function queueState(task: PlanTask) {
    const entries = await rawRows<Record<string, unknown>>(
      t.ctx,
      `SELECT id, position, version, content, attachments_json, metadata_json, delivery_reservation_token, delivery_attempted_at
         FROM queued_messages WHERE session_id = ? ORDER BY position, id`,
      [task.sessionId],
    );
    const revision = await rawRows<{ revision: number | string }>(t.ctx, `SELECT revision FROM pending_projector_queue_revisions WHERE session_id = ?`, [
      task.sessionId,
    ]);
    const plan = await t.ctx.knex('task_plans').select('comments_revision').where({ task_id: task.taskId }).first();
    const comments = await t.ctx.knex('task_plan_comments').where({ task_id: task.taskId }).orderBy('id');
    const attachments = await t.ctx
      .knex('task_message_attachments')
      .select('id', 'state', 'queue_id', 'message_id')
      .where({ task_id: task.taskId })
      .orderBy('id');
    const outcomes = await rawRows<Record<string, unknown>>(
      t.ctx,
      `SELECT id, status FROM pending_projector_prompt_outcomes WHERE session_id = ? ORDER BY id`,
      [task.sessionId],
    );
    return {
      entries: entries.map((e) => ({ ...e, id: String(e.id), position: Number(e.position), version: Number(e.version) })),
      revision: Number(revision[0]?.revision ?? 0),
      commentsRevision: Number(plan?.comments_revision),
      comments,
      attachments,
      outcomes,
    };
  }

  /**
   * On PostgreSQL, the server-side backends of the workers' transactions left open (idle in
   * transaction) for more than half a second: the hung change, its writes uncommitted. SQLite has no such view.
   */
  async function hungTransactions(): Promise<number[] | undefined> {
    if (dialect !== 'postgres') return undefined;
    const rows = await rawRows<{ pid: number | string }>(
      t.ctx,
      `SELECT pid FROM pg_stat_activity WHERE application_name = ? AND state = 'idle in transaction' AND state_change < now() - interval '500 milliseconds'`,
      [applicationName],
    );
    return rows.map((r) => Number(r.pid));
  }

  /** Whether the PostgreSQL backend `pid` still runs (its connection's client is gone once it does not). */
  async function backendAlive(pid: number): Promise<boolean> {
    const rows = await rawRows(t.ctx, `SELECT pid FROM pg_stat_activity WHERE pid = ?`, [pid]);
    return rows.length > 0;
  }

  /** Reached the failpoint: on PostgreSQL exactly one transaction of the worker stays open, and its backend is returned. */
  async function hungBackend(): Promise<number | undefined> {
    if (dialect !== 'postgres') return undefined;
    await new Promise((resolve) => setTimeout(resolve, 700));
    const pids = await hungTransactions();
    expect(pids).toHaveLength(1);
    return pids![0];
  }

  /** verify over the whole database, as a separate process: the summaries it stored match a fresh derivation. */
  const verified = () =>
    eventually(
      async () => {
        const run = await runCli(['verify', '--database-url', t.url]);
        return run.status === 0 ? run : undefined;
      },
      30_000,
      'verify exiting 0',
    );

  return { t, client, start, reached, seedQueue, queueState, hungBackend, backendAlive, verified };
}

// Each test starts two worker processes and runs verify three times: about 10 s on an idle
// 2-core host, several times that when the host is shared.
const CRASH_TEST_TIMEOUT_MS = 90_000;

describeEachDialect('queue edits across worker crashes on %s', (dialect) => {
  it(
    'kill -9 inside a queue.remove transaction: the queue, its comments and attachments are the old ones whole; the removal then applies in full',
    async () => {
      const h = await harness(dialect);
      const first = await h.start('before_withdrawal_commit=hang');
      const { task, ids, requests, commentIds, attachmentId } = await h.seedQueue(3);
      await h.verified();
      const before = await h.queueState(task);
      expect(before.entries.map((e) => e.id)).toEqual(ids);
      // Consumed by the entries: not in the collection.
      expect(before.comments).toEqual([]);
      expect(before.attachments).toEqual([expect.objectContaining({ id: attachmentId, state: 'claimed', queue_id: ids[0] })]);

      const pending = h.client.removeQueueEntry({ session_id: task.sessionId, queue_id: ids[0]! }, { timeoutMs: 2000 });
      await h.reached(first, 'before_withdrawal_commit');
      const backend = await h.hungBackend();
      expect(await h.queueState(task)).toEqual(before);
      await first.kill9();
      // The worker died before it could answer: the client's own timeout answers instead.
      expect(await pending).toMatchObject({ ok: false, error: { code: 'unavailable' } });

      await h.start();
      // The server rolled the dead client's transaction back and ended its backend.
      if (backend !== undefined) expect(await h.backendAlive(backend)).toBe(false);
      expect(await h.queueState(task)).toEqual(before);
      expect(await h.client.enqueue(requests[0]!)).toMatchObject({ ok: true, replayed: true, status: 'waiting', queue_id: ids[0] });
      await h.verified();

      // The old queue is whole, so the same removal applies, all of it.
      const removed = await h.client.removeQueueEntry({ session_id: task.sessionId, queue_id: ids[0]! });
      expect(removed).toMatchObject({
        ok: true,
        removed: [{ queue_id: ids[0] }],
        returned_comment_ids: [commentIds[0]],
        released_attachment_ids: [attachmentId],
        revision: before.revision + 1,
        count: 2,
      });
      const after = await h.queueState(task);
      expect(after.entries).toEqual(before.entries.slice(1));
      expect(after.revision).toBe(before.revision + 1);
      expect(after.comments.map((c: Record<string, unknown>) => c.id)).toEqual([commentIds[0]]);
      expect(after.commentsRevision).toBeGreaterThan(before.commentsRevision);
      expect(after.attachments).toEqual([expect.objectContaining({ id: attachmentId, state: 'staged', queue_id: '' })]);
      expect(after.outcomes).toEqual([{ id: ids[0], status: 'removed' }]);
      expect(await h.client.enqueue(requests[0]!)).toMatchObject({ ok: true, replayed: true, status: 'removed', queue_id: ids[0] });
      await h.verified();
    },
    CRASH_TEST_TIMEOUT_MS,
  );

  it(
    'kill -9 inside a queue.clear transaction: every entry still waits, none half removed; the clear then applies in full',
    async () => {
      const h = await harness(dialect);
      const first = await h.start('before_withdrawal_commit=hang');
      const { task, ids, requests, commentIds, attachmentId } = await h.seedQueue(3);
      await h.verified();
      const before = await h.queueState(task);

      const pending = h.client.clearQueue({ session_id: task.sessionId }, { timeoutMs: 2000 });
      await h.reached(first, 'before_withdrawal_commit');
      const backend = await h.hungBackend();
      expect(await h.queueState(task)).toEqual(before);
      await first.kill9();
      expect(await pending).toMatchObject({ ok: false, error: { code: 'unavailable' } });

      await h.start();
      if (backend !== undefined) expect(await h.backendAlive(backend)).toBe(false);
      expect(await h.queueState(task)).toEqual(before);
      for (const [i, request] of requests.entries())
        expect(await h.client.enqueue(request)).toMatchObject({ ok: true, replayed: true, status: 'waiting', queue_id: ids[i] });
      await h.verified();

      const cleared = await h.client.clearQueue({ session_id: task.sessionId });
      expect(cleared).toMatchObject({ ok: true, released_attachment_ids: [attachmentId], revision: before.revision + 1, count: 0 });
      if (!cleared.ok) throw new Error(JSON.stringify(cleared));
      expect(cleared.removed.map((r) => r.queue_id)).toEqual(ids);
      expect([...cleared.returned_comment_ids].sort()).toEqual([...commentIds].sort());
      const after = await h.queueState(task);
      expect(after.entries).toEqual([]);
      expect(after.comments.map((c: Record<string, unknown>) => c.id).sort()).toEqual([...commentIds].sort());
      expect(after.attachments).toEqual([expect.objectContaining({ id: attachmentId, state: 'staged', queue_id: '' })]);
      expect(after.outcomes).toEqual([...ids].sort().map((id) => ({ id, status: 'removed' })));
      await h.verified();
    },
    CRASH_TEST_TIMEOUT_MS,
  );

  it(
    'kill -9 inside a queue.reorder transaction: the old order at the old revision, whole; the same reorder then applies in full',
    async () => {
      const h = await harness(dialect);
      const first = await h.start('before_reorder_commit=hang');
      const { task, ids } = await h.seedQueue(4);
      await h.verified();
      const before = await h.queueState(task);
      expect(before.entries.map((e) => e.id)).toEqual(ids);
      const listed = await h.client.listQueue({ session_id: task.sessionId });
      if (!listed.ok) throw new Error(JSON.stringify(listed));
      expect(listed.revision).toBe(before.revision);
      const reversed = [...ids].reverse();

      const pending = h.client.reorderQueue({ session_id: task.sessionId, queue_ids: reversed, revision: listed.revision }, { timeoutMs: 2000 });
      await h.reached(first, 'before_reorder_commit');
      const backend = await h.hungBackend();
      expect(await h.queueState(task)).toEqual(before);
      await first.kill9();
      expect(await pending).toMatchObject({ ok: false, error: { code: 'unavailable' } });

      await h.start();
      if (backend !== undefined) expect(await h.backendAlive(backend)).toBe(false);
      expect(await h.queueState(task)).toEqual(before);
      expect(await h.client.listQueue({ session_id: task.sessionId })).toMatchObject({
        ok: true,
        revision: listed.revision,
        entries: ids.map((id) => ({ id })),
      });
      await h.verified();

      // Nothing moved, so the reorder drawn from the old list is still current, and applies whole.
      const reordered = await h.client.reorderQueue({ session_id: task.sessionId, queue_ids: reversed, revision: listed.revision });
      expect(reordered).toMatchObject({ ok: true, revision: listed.revision + 1, entries: reversed.map((id) => ({ id })) });
      const after = await h.queueState(task);
      expect(after.entries.map((e) => e.id)).toEqual(reversed);
      // The same positions dealt out in the new order; nothing else about an entry changed.
      expect(after.entries.map((e) => e.position)).toEqual(before.entries.map((e) => e.position));
      const byId = new Map(before.entries.map((e) => [e.id, e]));
      for (const e of after.entries) expect({ ...e, position: 0 }).toEqual({ ...byId.get(e.id)!, position: 0 });
      expect(after.revision).toBe(before.revision + 1);
      expect({ ...after, entries: [], revision: 0 }).toEqual({ ...before, entries: [], revision: 0 });
      await h.verified();
    },
    CRASH_TEST_TIMEOUT_MS,
  );
});
