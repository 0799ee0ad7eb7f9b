import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { partitionConsumerName } from '../../src/contract/eventPartitions.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { silentLogger } from '../../src/logger.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { seedSession } from '../support/seed.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// One worker alone holds both partitions: each event reaches both partitions' consumers, and the
// outcome counts say which handled it and which acknowledged it as another partition's.
describeEachDialect('a worker with EVENT_PARTITIONS=2 on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let summaries: ReturnType<typeof collectSummaries>;

  const outcomes = async () => {
    const counts: Record<string, number> = {};
    for (const v of (await worker.metrics.events.get()).values) counts[String(v.labels.outcome)] = v.value;
    return counts;
  };
  const jsm = () => jetstreamManager(nc);
  /** Publishes one event (or raw bytes) and waits until both partitions settled it; resolves to the outcome counts it added. */
  const settle = async (type: string, data: Record<string, unknown> | Uint8Array) => {
    const before = await outcomes();
    const total = (c: Record<string, number>) => Object.entries(c).reduce((sum, [k, n]) => (k === 'retried' ? sum : sum + n), 0);
    nc.publish(`${prefix}${type}`, data instanceof Uint8Array ? data : envelope(type, data));
    const after = await eventually(async () => {
      const now = await outcomes();
      return total(now) - total(before) >= 2 ? now : undefined;
    }, 20_000);
    return Object.fromEntries(Object.entries(after).flatMap(([k, n]) => (n - (before[k] ?? 0) > 0 ? [[k, n - (before[k] ?? 0)]] : [])));
  };

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`partition_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { eventPartitions: 2, eventPartitionLeaseMs: 3000 }), logger: silentLogger() });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('creates one durable consumer per partition beside the shared one', async () => {
    const manager = await jsm();
    for (const name of [worker.topology.consumer, partitionConsumerName(worker.topology, 0, 2), partitionConsumerName(worker.topology, 1, 2)]) {
      expect((await manager.consumers.info(worker.topology.eventsStream, name)).name).toBe(name);
    }
  });

  it('projects an event naming its task in one partition and acks it unread in the other', async () => {
    const { taskId, sessionId } = await seedSession(t.ctx);
    expect(await settle('task_session.state_changed', { task_id: taskId, session_id: sessionId })).toEqual({ projected: 1, other_partition: 1 });
    await eventually(() => summaries.latest(taskId));
  });

  it("routes an event naming only its session by the session's task", async () => {
    const { taskId, sessionId } = await seedSession(t.ctx);
    expect(await settle('task_session.state_changed', { session_id: sessionId })).toEqual({ projected: 1, other_partition: 1 });
    await eventually(() => summaries.latest(taskId));
  });

  it('settles an event naming neither task nor session once, in partition 0', async () => {
    expect(await settle('task.updated', {})).toEqual({ no_task: 1, other_partition: 1 });
  });

  it('dead-letters malformed input once, in partition 0, though both partitions read it', async () => {
    const records = async () => (await jsm()).streams.info(worker.topology.deadLetterStream).then((info) => info.state.messages);
    const before = await records();
    expect(await settle('message.added', new TextEncoder().encode('{ not json'))).toEqual({ dead_lettered: 1, other_partition: 1 });
    expect(await records()).toBe(before + 1);
  });
});
