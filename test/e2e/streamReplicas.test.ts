import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker } from '../../src/bin/worker.js';
import { topologyFor, topologyStreams } from '../../src/contract/subjects.js';
import { ensureTopology } from '../../src/events/natsTopology.js';
import { silentLogger } from '../../src/logger.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// The shared server is one node: it can hold streams of 1 replica only, which is what STREAM_REPLICAS'
// default creates there. Creating with 3 on a cluster is the cluster failover test's
// (test/e2e/clusterFailover.test.ts).
describe('STREAM_REPLICAS on a single server', () => {
  let nc: NatsConnection;
  let t: TestDatabase;
  const prefixes: string[] = [];
  const fresh = (label: string) => {
    const prefix = uniquePrefix(label);
    prefixes.push(prefix);
    return prefix;
  };
  const replicasOf = async (prefix: string) => {
    const jsm = await jetstreamManager(nc);
    const counts: Record<string, number> = {};
    for (const stream of topologyStreams(topologyFor(prefix))) counts[stream] = (await jsm.streams.info(stream)).config.num_replicas;
    return counts;
  };

  beforeAll(async () => {
    nc = await connectTestNats();
    t = await openTestDatabase('sqlite');
  });
  afterAll(async () => {
    for (const prefix of prefixes) await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('creates every stream and the summary bucket with the default of 1 replica and reports nothing to change', async () => {
    const prefix = fresh('replicas_default');
    const ensured = await ensureTopology(nc, { topology: topologyFor(prefix), streamMaxAgeMs: 3_600_000, maxDeliver: 5, ackWaitMs: 5000 });
    expect(ensured.replicaMismatches).toEqual([]);
    const counts = await replicasOf(prefix);
    expect(Object.keys(counts)).toHaveLength(topologyStreams(topologyFor(prefix)).length);
    for (const count of Object.values(counts)) expect(Math.max(1, count)).toBe(1);
  });

  it('leaves streams made with 1 replica as they are when the worker restarts with 3, warning once per stream with the command that changes it', async () => {
    const prefix = fresh('replicas_mismatch');
    const first = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
    await first.stop();
    const before = await replicasOf(prefix);

    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const second = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { streamReplicas: 3 }), logger });
    await second.stop();

    expect(await replicasOf(prefix)).toEqual(before);
    const warnings = lines
      .map((l) => JSON.parse(l) as { component?: string; stream?: string; replicas?: number; wanted?: number; msg: string })
      .filter((l) => l.component === 'topology');
    expect(warnings.map((w) => w.stream).sort()).toEqual([...topologyStreams(topologyFor(prefix))].sort());
    for (const w of warnings) {
      expect(w).toMatchObject({ replicas: 1, wanted: 3 });
      expect(w.msg).toContain(`nats stream edit ${w.stream} --replicas 3`);
    }
  });
});
