import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { silentLogger } from '../../src/logger.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, type RowWriter } from '../support/rowWriters.js';
import { testWorkerConfig } from '../support/workerConfig.js';

describe('the operations endpoints over a real NATS: dead letters and the consumer', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;

  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
    nc = await connectTestNats();
    prefix = uniquePrefix('ops');
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  const listed = async () => {
    const reply = await client.listDeadLetters({ limit: 50 });
    if (!reply.ok) throw new Error(reply.error.message);
    return reply.dead_letters;
  };

  it('lists a poison event, shows its original, retries it once, and counts it in the consumer stats', async () => {
    nc.publish(`${prefix}message.added`, '{ not json');
    const [record] = await eventually(async () => ((await listed()).length === 1 ? listed() : undefined), 10_000, 'the dead letter');
    expect(record).toMatchObject({ kind: 'rejected', reason: 'invalid_json', subject: `${prefix}message.added`, payload_preview: '{ not json' });

    expect(await client.showDeadLetter({ seq: record!.seq })).toMatchObject({
      ok: true,
      dead_letter: { seq: record!.seq, reason: 'invalid_json' },
      original: { subject: `${prefix}message.added`, data: '{ not json' },
    });
    const stats = await eventually(
      async () => {
        const reply = await client.consumerStats({});
        return reply.ok && reply.num_pending === 0 && reply.num_ack_pending === 0 ? reply : undefined;
      },
      10_000,
      'the consumer to settle',
    );
    expect(stats).toMatchObject({ dead_letters: 1, stream_messages: expect.any(Number), consumer: expect.stringContaining('pending-projector') });

    const retried = await client.retryDeadLetter({ seq: record!.seq });
    expect(retried).toMatchObject({ ok: true, seq: record!.seq, new_stream_seq: expect.any(Number) });
    // The record is gone; the re-injected bytes are still poison, so the worker dead-letters them anew.
    expect(await client.retryDeadLetter({ seq: record!.seq })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    const again = await eventually(async () => ((await listed()).length === 1 ? listed() : undefined), 10_000, 'the new dead letter');
    expect(again[0]).toMatchObject({ reason: 'invalid_json', stream_seq: retried.ok ? retried.new_stream_seq : -1 });
    expect(again[0]!.seq).not.toBe(record!.seq);
  });

  it('answers an unknown id not_found and a body out of its bounds bad_request', async () => {
    expect(await client.showDeadLetter({ seq: 999_999 })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await client.showDeadLetter({ seq: 0 })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listDeadLetters({ limit: 501 })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.consumerStats({ verbose: true } as unknown as Record<string, never>)).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: expect.stringMatching(/unknown field/) },
    });
  });
});

describeEachSchemaAndDialect('summary.verify over a real NATS on %s', (dialect, schema) => {
  let t: TestDatabase;
  let w: RowWriter;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema);
    w = rowWriter(schema, t.ctx);
    nc = await connectTestNats();
    prefix = uniquePrefix(`verify_${dialect}`);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('pages through every task, reports each drifted one as verify does, and writes nothing', async () => {
    const fine = await w.session({ state: 'IDLE' });
    await w.summary({ taskId: fine.taskId, workspaceId: fine.workspaceId, revision: 2, summary: '{}', updatedAt: new Date().toISOString() });
    const stale = await w.session();
    await w.summary({
      taskId: stale.taskId,
      workspaceId: stale.workspaceId,
      revision: 4,
      summary: '{"pending_action":"permission"}',
      updatedAt: new Date().toISOString(),
    });
    const missing = await w.session({ state: 'IDLE' });

    const drifted: unknown[] = [];
    let checked = 0;
    let cursor: string | undefined;
    do {
      const page = await client.verifySummaries({ limit: 2, cursor });
      if (!page.ok) throw new Error(page.error.message);
      checked += page.checked;
      drifted.push(...page.drifted);
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(checked).toBe(3);
    expect(drifted).toEqual(
      expect.arrayContaining([
        { task_id: stale.taskId, kind: 'stale', stored: 'permission', derived: null, stored_queued_prompt_count: 0, derived_queued_prompt_count: 0 },
        { task_id: missing.taskId, kind: 'missing', stored: null, derived: null, stored_queued_prompt_count: 0, derived_queued_prompt_count: 0 },
      ]),
    );
    expect(drifted).toHaveLength(2);
    // A dry run: the stale row is as it was.
    const row = await t.ctx.knex('task_status_summaries').where({ task_id: stale.taskId }).first();
    expect([Number(row.revision), row.summary]).toEqual([4, '{"pending_action":"permission"}']);
    expect(await client.verifySummaries({ limit: 10, cursor: 'bm90IGlzc3VlZA-' })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
  });
});
