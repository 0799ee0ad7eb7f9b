import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startBucketRefiller } from '../../src/bin/worker/summaryBucketRefiller.js';
import { NatsSummaryPublisher } from '../../src/events/natsSummaryPublisher.js';
import { ensureOutputTopology, summaryKey } from '../../src/events/natsTopology.js';
import { topologyFor, type Topology } from '../../src/contract/subjects.js';
import { SummaryBucket } from '../../src/events/summaryBucket.js';
import { silentLogger } from '../../src/logger.js';
import { createMetrics } from '../../src/metrics.js';
import { refillSummaryBucket } from '../../src/projectors/refillSummaryBucket.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { countStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { systemClock } from '../../src/timestamps.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { createTestProjector } from '../support/projector.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

const encoder = new TextEncoder();
const revisionIn = (value: Uint8Array | undefined): number | undefined =>
  value ? (JSON.parse(new TextDecoder().decode(value)) as { data: { status_summary: { revision: number } } }).data.status_summary.revision : undefined;

let nc: NatsConnection;
const prefixes: string[] = [];
const fresh = (label: string): Topology => {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  return topologyFor(prefix);
};
const loseBucket = async (topology: Topology) => (await jetstreamManager(nc)).streams.delete(topology.summaryBucketStream);

beforeAll(async () => {
  nc = await connectTestNats();
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteTopology(nc, prefix);
  await nc?.drain();
});

describe('the summary bucket on a real NATS', () => {
  it('is created in memory by default and in a file on request; an existing bucket keeps its storage', async () => {
    const memory = fresh('bucket_mem');
    expect((await (await SummaryBucket.open(nc, memory)).status()).storage).toBe('memory');
    const file = fresh('bucket_file');
    expect((await (await SummaryBucket.open(nc, file, 'file')).status()).storage).toBe('file');
    const reopened = await SummaryBucket.open(nc, file, 'memory');
    expect((await reopened.status()).storage).toBe('file');
    const info = await (await jetstreamManager(nc)).streams.info(file.summaryBucketStream);
    expect(info.config.storage).toBe(StorageType.File);
  });

  it('recreates a lost bucket on the next put, once for concurrent puts, and tells its listeners', async () => {
    const topology = fresh('bucket_lost');
    const bucket = await SummaryBucket.open(nc, topology);
    let recreated = 0;
    bucket.onRecreated(() => recreated++);
    await bucket.put('a', encoder.encode('one'));
    await loseBucket(topology);
    await Promise.all(['a', 'b', 'c'].map((key) => bucket.put(key, encoder.encode(`two-${key}`))));
    expect(recreated).toBe(1);
    const kv = await new Kvm(nc).open(topology.summaryBucket);
    expect((await kv.get('a'))?.string()).toBe('two-a');
    expect((await bucket.status()).values).toBe(3);
    // A bucket that exists is left alone.
    await bucket.restoreIfLost();
    expect(recreated).toBe(1);
  });

  it('fills an empty key and leaves a taken one as it is, also when the bucket was lost', async () => {
    const topology = fresh('bucket_fill');
    const bucket = await SummaryBucket.open(nc, topology);
    await bucket.put('taken', encoder.encode('newer'));
    expect(await bucket.fill('taken', encoder.encode('older'))).toBe(false);
    expect(await bucket.fill('empty', encoder.encode('filled'))).toBe(true);
    const kv = await new Kvm(nc).open(topology.summaryBucket);
    expect((await kv.get('taken'))?.string()).toBe('newer');
    expect((await kv.get('empty'))?.string()).toBe('filled');
    await loseBucket(topology);
    expect(await bucket.fill('empty', encoder.encode('again'))).toBe(true);
  });
});

describeEachDialect('refilling the summary bucket from %s', (dialect) => {
  let t: TestDatabase;
  let topology: Topology;
  let bucket: SummaryBucket;
  let publisher: NatsSummaryPublisher;
  let taskIds: string[];

  beforeEach(async () => {
    t = await openTestDatabase(dialect);
    topology = fresh(`refill_${dialect}`);
    ({ summaries: bucket } = await ensureOutputTopology(nc, topology));
    publisher = new NatsSummaryPublisher(nc, topology, bucket, systemClock);
    const projector = createTestProjector(t.ctx, { publisher, batchSize: 4 });
    const sessions = await Promise.all(Array.from({ length: 5 }, () => seedSession(t.ctx)));
    await seedClarificationBundle(t.ctx, {
      sessionId: sessions[0]!.sessionId,
      turnId: await seedTurnAt(t.ctx, sessions[0]!.sessionId, { startedAt: new Date().toISOString() }),
    });
    taskIds = sessions.map((s) => s.taskId).sort();
    for (const taskId of taskIds) await projector.reproject(taskId);
  });
  afterEach(async () => {
    await t.close();
  });

  it('puts every stored summary into an emptied bucket, page by page, without moving a newer entry back or copying a corrupt row', async () => {
    let recreated = 0;
    bucket.onRecreated(() => recreated++);
    await loseBucket(topology);
    await bucket.restoreIfLost();
    expect(recreated).toBe(1);
    // A projection put a newer revision of the first task meanwhile; the second task's row is unreadable.
    await bucket.put(summaryKey(taskIds[0]!), encoder.encode(JSON.stringify({ data: { status_summary: { revision: 99 } } })));
    await t.ctx.knex('task_status_summaries').where('task_id', taskIds[1]).update({ summary: '{not json' });

    const pages: number[] = [];
    const progress = await refillSummaryBucket({
      store: createProjectionStore(t.ctx),
      pageSize: 2,
      fill: (u) => publisher.fillSummary(u),
      onPage: (p) => pages.push(p.visited),
    });

    expect(progress).toEqual({ visited: 5, filled: 3, corrupt: 1 });
    expect(pages).toEqual([2, 4, 5]);
    const kv = await new Kvm(nc).open(topology.summaryBucket);
    expect(revisionIn((await kv.get(summaryKey(taskIds[0]!)))?.value)).toBe(99);
    expect(await kv.get(summaryKey(taskIds[1]!))).toBeNull();
    const rows = await t.ctx.knex('task_status_summaries').whereIn('task_id', taskIds.slice(2)).select('task_id', 'revision');
    for (const row of rows as Array<{ task_id: string; revision: number }>) {
      const entry = await kv.get(summaryKey(row.task_id));
      expect(revisionIn(entry?.value)).toBe(Number(row.revision));
      // The same envelope a projection publishes.
      expect(entry?.json()).toMatchObject({ type: 'task.status_summary.updated', source: 'pending-projector', data: { task_id: row.task_id } });
    }
  });

  it('refills at start when the bucket holds fewer keys than there are stored summaries, and after it recreated a lost bucket', async () => {
    await loseBucket(topology);
    await bucket.restoreIfLost();
    const metrics = createMetrics();
    const refiller = startBucketRefiller({
      summaries: { ...createProjectionStore(t.ctx), countStatusSummaries: () => countStatusSummaries(t.ctx) },
      nc,
      bucket,
      publisher,
      pageSize: 2,
      logger: silentLogger(),
      metrics,
    });
    try {
      await refiller.whenIdle();
      expect((await bucket.status()).values).toBe(5);
      await loseBucket(topology);
      await bucket.restoreIfLost();
      await refiller.whenIdle();
      expect((await bucket.status()).values).toBe(5);
      expect((await metrics.bucketRefills.get()).values).toEqual([expect.objectContaining({ labels: { result: 'done' }, value: 2 })]);
      expect((await metrics.bucketKeysFilled.get()).values[0]?.value).toBe(10);
    } finally {
      await refiller.stop();
    }
  });
});
