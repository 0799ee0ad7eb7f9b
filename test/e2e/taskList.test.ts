import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { silentLogger } from '../../src/logger.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import type { TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, type RowWriter } from '../support/rowWriters.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

describeEachSchemaAndDialect('task.list over a real NATS on %s', (dialect, schema) => {
  let t: TestDatabase;
  let w: RowWriter;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let summaries: ReturnType<typeof collectSummaries>;

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema);
    w = rowWriter(schema, t.ctx);
    nc = await connectTestNats();
    prefix = uniquePrefix(`tlist_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('repairs a stale pending_action on the read, publishes the replacement before replying, and lists the repaired summary', async () => {
    const workspaceId = `ws-${prefix}`;
    // A question pending on the open turn, no event published: the stored summary says nothing waits.
    const asking = await w.session({ workspaceId });
    const turn = await w.startTurn(asking.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
    await w.bundle({ sessionId: asking.sessionId, turnId: turn.id, statuses: ['pending'] });
    await w.summary({ taskId: asking.taskId, workspaceId, revision: 3, summary: '{}', updatedAt: new Date().toISOString() });
    // A stored question that is gone: the read clears it.
    const stale = await w.session({ workspaceId });
    await w.summary({ taskId: stale.taskId, workspaceId, revision: 5, summary: '{"pending_action":"clarification"}', updatedAt: new Date().toISOString() });
    // Archived tasks are not listed.
    const archived = await w.session({ workspaceId });
    await t.ctx.knex('tasks').where({ id: archived.taskId }).update({ archived_at: new Date().toISOString() });

    const reply = await client.listTasks({ workspace_id: workspaceId, limit: 10 });
    if (!reply.ok) throw new Error(reply.error.message);
    const byId = new Map(reply.tasks.map((task) => [task.task_id, task]));
    expect([...byId.keys()].sort()).toEqual([asking.taskId, stale.taskId].sort());
    expect(byId.get(asking.taskId)).toMatchObject({ workspace_id: workspaceId, status_summary: { pending_action: 'clarification', revision: 4 } });
    expect(byId.get(stale.taskId)!.status_summary).toMatchObject({ revision: 6 });
    expect(byId.get(stale.taskId)!.status_summary!.pending_action).toBeUndefined();
    expect(reply.next_cursor).toBeNull();
    // Published before the reply (the worker shares this connection, so the server sent them first):
    // once the flush is answered and the subscription's loop has run, both are here.
    await nc.flush();
    await new Promise((resolve) => setImmediate(resolve));
    expect(summaries.latest(asking.taskId)).toMatchObject({ status_summary: { pending_action: 'clarification', revision: 4 } });
    expect(summaries.latest(stale.taskId)).toMatchObject({ status_summary: { revision: 6 } });

    // A second read finds nothing to repair: no new revision, nothing published.
    const again = await client.listTasks({ workspace_id: workspaceId, limit: 10 });
    expect(again.ok && again.tasks.map((task) => task.status_summary?.revision).sort()).toEqual([4, 6]);
  });

  it('pages by cursor through every task of a workspace exactly once, and lists a task without a summary as null', async () => {
    const workspaceId = `ws-pages-${prefix}`;
    const seeded: string[] = [];
    for (let i = 0; i < 7; i++) seeded.push((await w.session({ workspaceId, state: 'IDLE' })).taskId);
    const listed: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listTasks({ workspace_id: workspaceId, limit: 3, cursor });
      if (!page.ok) throw new Error(page.error.message);
      expect(page.tasks.length).toBeLessThanOrEqual(3);
      listed.push(...page.tasks.map((task) => task.task_id));
      cursor = page.next_cursor ?? undefined;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(3);
    expect(listed).toEqual([...seeded].sort());
    // Without a workspace, every workspace's tasks are listed (at least these).
    const all = await client.listTasks({ limit: 500 });
    expect(all.ok && seeded.every((id) => all.tasks.some((task) => task.task_id === id))).toBe(true);
  });

  it('refuses a cursor it did not issue and a limit out of range with bad_request', async () => {
    expect(await client.listTasks({ limit: 10, cursor: 'bm90LWEtY3Vyc29y-' })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listTasks({ limit: 10, cursor: 'not a cursor' })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listTasks({ limit: 0 })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listTasks({ limit: 501 })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
  });
});
