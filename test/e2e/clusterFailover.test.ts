import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { topologyFor, topologyStreams } from '../../src/contract/subjects.js';
import { convergenceFindings, runVerify, waitQuiet } from '../support/convergence.js';
import { isAvailable, openTestDatabase } from '../support/databases.js';
import { eventually, uniquePrefix } from '../support/nats.js';
import { startNatsCluster, type NatsCluster } from '../support/natsCluster.js';
import { privateNatsAvailable } from '../support/privateNats.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';
import { randomStep, seededRandom, seedWorkloadTasks } from '../support/workload.js';

const WORKER_CONNECTION = 'pending-projector-worker';
const TASKS = 300;

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A producer that behaves as a Kandev backend should beside a cluster: the rows first, then the
 * event through JetStream, retried with a growing wait until a server acknowledges it (a publish
 * fails while the stream elects a leader), under one message id so a retry after a lost ack is
 * stored once. One still refused after a minute is counted as failed.
 */
function durablePublisher(nc: NatsConnection) {
  const js = jetstream(nc, { timeout: 2000 });
  const stats = { events: 0, acked: 0, retried: 0, failed: 0, lastError: '' };
  const publish = async (subject: string, data: Uint8Array) => {
    stats.events++;
    const msgID = (JSON.parse(new TextDecoder().decode(data)) as { id: string }).id;
    const deadline = Date.now() + 60_000;
    for (let attempt = 0; ; attempt++) {
      try {
        await js.publish(subject, data, { msgID });
        stats.acked++;
        return;
      } catch (err) {
        // Counted, not thrown: the producer keeps its pace, and the test fails on the count with its report.
        if (Date.now() > deadline) {
          stats.failed++;
          stats.lastError = String(err);
          return;
        }
        stats.retried++;
        await sleep(Math.min(1000, 50 * 2 ** attempt));
      }
    }
  };
  return { publish, stats };
}

/** Waits until every replica of each stream is current (a restarted node has caught up), bounded. */
async function replicasCurrent(jsm: JetStreamManager, streams: readonly string[], timeoutMs: number): Promise<void> {
  await eventually(
    async () => {
      for (const stream of streams) {
        const { cluster } = await jsm.streams.info(stream);
        if (!cluster?.leader || (cluster.replicas ?? []).length !== 2 || !cluster.replicas!.every((r) => r.current && !r.offline)) {
          await sleep(250); // a few requests a second, not forty: the host is small and busy
          return undefined;
        }
      }
      return true;
    },
    timeoutMs,
    'every stream replica to be current',
  );
}

async function leaderOf(jsm: JetStreamManager, stream: string): Promise<string> {
  return eventually(async () => (await jsm.streams.info(stream)).cluster?.leader || undefined, 20_000, `a leader of ${stream}`);
}

async function workerConnections(cluster: NatsCluster): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const node of cluster.nodes) counts[node.name] = (await cluster.clientNames(node.name)).filter((n) => n === WORKER_CONNECTION).length;
  return counts;
}

/** The workers' log lines at warn and above, counted by message (its first 80 characters). */
function warningsOf(workers: readonly WorkerProcess[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of workers.flatMap((w) => w.output().split('\n'))) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { level?: number; msg?: string };
    if ((entry.level ?? 0) < 40) continue;
    const key = (entry.msg ?? '').slice(0, 80);
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

describe.skipIf(!isAvailable('postgres') || !privateNatsAvailable())('two workers on a three-node JetStream cluster with STREAM_REPLICAS=3', () => {
  it('lose the event stream leader, get it back, lose another node, and still end with zero drift and strictly increasing revisions per task', async () => {
    const started = Date.now();
    const cluster = await startNatsCluster(3);
    cleanups.push(() => cluster.stop());
    const t = await openTestDatabase('postgres');
    cleanups.push(() => t.close());
    const nc = await connect({ servers: cluster.urls.split(','), name: 'pp-cluster-test', maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    cleanups.push(() => nc.close());
    const jsm = await jetstreamManager(nc);
    const prefix = uniquePrefix('cluster');
    const topology = topologyFor(prefix);
    const tasks = await seedWorkloadTasks(t.ctx, TASKS);

    // Both workers are given every node, each list in another order: a node's death must move
    // the connection to a live one, whichever it was.
    const reversed = [...cluster.nodes].reverse().map((n) => n.url);
    const workers = await Promise.all(
      [cluster.urls, reversed.join(',')].map(async (urls) => {
        const worker = await spawnWorker({ DATABASE_URL: t.url, NATS_URL: urls, SUBJECT_PREFIX: prefix, STREAM_REPLICAS: '3' }, { timeoutMs: 60_000 });
        cleanups.push(async () => {
          // A worker that cannot shut down gracefully in 15 s is killed: the test must not leak it.
          const timer = setTimeout(() => void worker.kill9(), 15_000);
          await worker.stop();
          clearTimeout(timer);
        });
        return worker;
      }),
    );
    const ready = Date.now();
    for (const stream of topologyStreams(topology)) expect((await jsm.streams.info(stream)).config.num_replicas, stream).toBe(3);

    const producer = durablePublisher(nc);
    let producing = true;
    const random = seededRandom(26);
    const producers = [0, 1, 2, 3].map(async () => {
      while (producing) {
        await randomStep(t.ctx, nc, prefix, tasks, random, producer.publish);
        await sleep(5);
      }
    });

    const faults: string[] = [];
    /** Worker connections on the node at the moment it was killed, by node. */
    const hit: Record<string, number> = {};
    /** The streams whose leader `name` is: the events, the summaries (output) and the bucket's. */
    const ledBy = async (name: string) => {
      const led: string[] = [];
      for (const stream of [topology.eventsStream, topology.outputStream, topology.summaryBucketStream]) {
        if ((await leaderOf(jsm, stream)) === name) led.push(stream);
      }
      return led;
    };
    const kill = async (name: string) => {
      hit[name] = (await workerConnections(cluster))[name] ?? 0;
      const led = await ledBy(name);
      await cluster.kill(name);
      faults.push(
        `killed ${name} (leader of ${led.join(', ') || 'nothing'}; ${hit[name]} worker connection(s)) at ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
    };
    try {
      await sleep(3000);
      const firstLeader = await leaderOf(jsm, topology.eventsStream);
      await kill(firstLeader);
      await sleep(6000);
      expect(await leaderOf(jsm, topology.eventsStream)).not.toBe(firstLeader);
      await cluster.restart(firstLeader);
      faults.push(`restarted ${firstLeader} at ${((Date.now() - started) / 1000).toFixed(1)} s`);
      // Until it has caught up, a second loss would leave some stream without a current majority.
      await replicasCurrent(jsm, topologyStreams(topology), 45_000);
      await sleep(2000);
      // Another node: one a worker is connected to if the first kill moved none (the multi-server
      // NATS_URL is tested only when a worker's server dies), then the summary stream's leader (its
      // failover is where a revision could repeat or go backwards: publishes wait for its ack before
      // COMMIT), then the event stream's.
      const [outputLeader, eventsLeader] = [await leaderOf(jsm, topology.outputStream), await leaderOf(jsm, topology.eventsStream)];
      const connections = await workerConnections(cluster);
      const moved = Object.values(hit).some((n) => n > 0);
      const score = (name: string) => (!moved && connections[name]! > 0 ? 4 : 0) + (name === outputLeader ? 2 : 0) + (name === eventsLeader ? 1 : 0);
      const second = cluster.nodes
        .map((n) => n.name)
        .filter((name) => name !== firstLeader)
        .sort((a, b) => score(b) - score(a))[0]!;
      await kill(second);
      await sleep(5000);
    } finally {
      producing = false;
      await Promise.all(producers);
    }

    // Quiet: nothing pending or unacknowledged on the consumer, and no new summary for 3 s.
    await waitQuiet(jsm, topology, [topology.consumer]);

    const verify = await runVerify(t.url);
    expect(verify.stderr, verify.stdout).toMatch(new RegExp(`verified ${TASKS} tasks: 0 drifted`));
    expect(verify.code).toBe(0);

    // After the failovers the bucket too must hold each task's last revision.
    const { backwards, mismatched, staleBucket, published } = await convergenceFindings(
      nc,
      t.ctx,
      topology,
      tasks.map((x) => x.taskId),
    );
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const report =
      `setup ${((ready - started) / 1000).toFixed(1)} s; ${faults.join('; ')}; producer ${JSON.stringify(producer.stats)}; ` +
      `${[...published.values()].reduce((n, e) => n + e.length, 0)} summaries published; worker warnings ${JSON.stringify(warningsOf(workers))}; ${seconds} s`;
    expect(backwards, report).toEqual([]);
    expect(mismatched, report).toEqual([]);
    expect(staleBucket, report).toEqual([]);
    expect(producer.stats.failed, report).toBe(0);
    // The multi-server NATS_URL: some worker lost the node it was connected to, and both kept working.
    expect(
      Object.values(hit).reduce((a, b) => a + b, 0),
      report,
    ).toBeGreaterThan(0);
    for (const worker of workers) expect(worker.child.exitCode, worker.output().slice(-4000)).toBeNull();
    expect(
      Object.values(await workerConnections(cluster)).reduce((a, b) => a + b, 0),
      report,
    ).toBe(2);
    console.info(`cluster failover: ${report}`);
  }, 180_000);
});
