import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { isCanonicalTimestamp } from '../../src/timestamps.js';
import { describeEachDialect, openSecondPool, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { testWorkerConfig } from '../support/workerConfig.js';
import type { Database } from '../../src/repository/database.js';

const EVENTS = 6;

// Two replicas on one PostgreSQL schema; SQLite allows one worker per database.
describeEachDialect('replica.stats over a real NATS on %s', (dialect) => {
  const replicaCount = dialect === 'postgres' ? 2 : 1;
  let t: TestDatabase;
  let secondPool: Database | undefined;
  let nc: NatsConnection;
  let workers: WorkerHandle[] = [];
  let prefix: string;
  let client: PendingProjectorClient;

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`replicas_${dialect}`);
    workers.push(await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() }));
    if (replicaCount === 2) {
      secondPool = openSecondPool(t);
      workers.push(await startWorker({ db: secondPool, nc, config: testWorkerConfig(prefix), logger: silentLogger() }));
    }
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    workers = [];
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await secondPool?.destroy();
    await t?.close();
  });

  it("gathers every replica's own entry, and their events by outcome add up to the events published", async () => {
    for (let i = 0; i < EVENTS; i++) nc.publish(`${prefix}message.added`, envelope('message.added', { task_id: `missing-${i}`, session_id: `s-${i}` }));
    const total = (replicas: Array<{ events_by_outcome: Record<string, number> }>) =>
      replicas.reduce((sum, r) => sum + Object.values(r.events_by_outcome).reduce((a, b) => a + b, 0), 0);
    const reply = await eventually(
      async () => {
        const r = await client.replicaStats({});
        return r.ok && r.replicas.length === replicaCount && total(r.replicas) === EVENTS ? r : undefined;
      },
      15_000,
      'every replica to answer with the events counted',
    );
    const names = reply.replicas.map((r) => r.replica);
    expect(names).toEqual([...new Set(names)].sort());
    for (const r of reply.replicas) {
      expect(r.replica).toMatch(/^[^:]+:\d+:[0-9a-f]{8}$/);
      expect(isCanonicalTimestamp(r.started_at)).toBe(true);
      expect(r.partitions).toEqual([]);
    }
    // Each replica's numbers are its /metrics counter's.
    const scraped = await Promise.all(workers.map(async (w) => (await w.metrics.events.get()).values.reduce((a, v) => a + v.value, 0)));
    expect(scraped.reduce((a, b) => a + b, 0)).toBe(EVENTS);
  });

  it('refuses a body with a field bad_request', async () => {
    expect(await client.replicaStats({ verbose: true } as unknown as Record<string, never>)).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: expect.stringMatching(/unknown field/) },
    });
  });
});

describe('the typed client gathering an endpoint every replica answers', () => {
  let nc: NatsConnection;
  let prefix: string;
  let client: PendingProjectorClient;
  const replies = (subject: string, ...bodies: object[]) =>
    bodies.map((body) => nc.subscribe(subject, { callback: (_err, msg) => void msg.respond(JSON.stringify(body)) }));

  beforeAll(async () => {
    nc = await connectTestNats();
    prefix = uniquePrefix('gather');
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await nc?.drain();
  });

  const entry = (replica: string) => ({ replica, started_at: '2026-01-01T00:00:00.000000000Z', events_by_outcome: { projected: 1 }, partitions: [] });
  const failed = { ok: false, error: { code: 'internal', message: 'this replica failed' } };

  it('is unavailable when no replica answers', async () => {
    expect(await client.replicaStats({}, { gatherMs: 200 })).toMatchObject({ ok: false, error: { code: 'unavailable' } });
  });

  it("returns every ok replica's entry sorted by replica, and a failure only when no replica answered ok", async () => {
    const subject = topologyFor(prefix).serviceSubject('replica.stats');
    const subs = replies(subject, { ok: true, replicas: [entry('b')] }, failed, { ok: true, replicas: [entry('a')] });
    await nc.flush();
    expect(await client.replicaStats({}, { gatherMs: 300 })).toEqual({ ok: true, replicas: [entry('a'), entry('b')] });
    for (const sub of subs) sub.unsubscribe();
    const only = replies(subject, failed);
    await nc.flush();
    expect(await client.replicaStats({}, { gatherMs: 300 })).toEqual(failed);
    for (const sub of only) sub.unsubscribe();
  });
});
