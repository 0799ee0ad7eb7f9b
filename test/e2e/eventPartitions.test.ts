import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { partitionLeaseName } from '../../src/contract/eventPartitions.js';
import { topologyFor, type Topology } from '../../src/contract/subjects.js';
import { eventConsumers } from '../../src/events/natsTopology.js';
import { listLiveLeases } from '../../src/repository/projection/leases.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { convergenceFindings, runVerify, waitQuiet } from '../support/convergence.js';
import { isAvailable, openTestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, natsAvailable, natsUrl, uniquePrefix } from '../support/nats.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';
import { randomStep, seededRandom, seedWorkloadTasks } from '../support/workload.js';

const TASKS = 100;
const PARTITIONS = 2;
const LEASE_MS = 3000;

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pid in each partition lease's owner (`host:pid:random`), by partition. */
async function partitionHolders(ctx: RepositoryContext, topology: Topology): Promise<Map<number, number>> {
  const held = new Map<number, number>();
  const leases = await listLiveLeases(ctx, 'event_partition.');
  for (let k = 0; k < PARTITIONS; k++) {
    const lease = leases.find((l) => l.name === partitionLeaseName(topology, k, PARTITIONS));
    if (lease) held.set(k, Number(lease.owner.split(':')[1]));
  }
  return held;
}

describe.skipIf(!isAvailable('postgres') || !natsAvailable())('EVENT_PARTITIONS=2 with two worker processes', () => {
  it('spreads the partitions over both, hands the partition of a replica killed mid-stream to the other, and ends with zero drift and increasing revisions', async () => {
    const started = Date.now();
    const t = await openTestDatabase('postgres');
    cleanups.push(() => t.close());
    const nc: NatsConnection = await connectTestNats();
    cleanups.push(() => nc.close());
    const prefix = uniquePrefix('partitions');
    cleanups.push(() => deleteTopology(nc, prefix));
    const topology = topologyFor(prefix);
    const jsm = await jetstreamManager(nc);
    const tasks = await seedWorkloadTasks(t.ctx, TASKS);

    const env = {
      DATABASE_URL: t.url,
      NATS_URL: natsUrl(),
      SUBJECT_PREFIX: prefix,
      EVENT_PARTITIONS: String(PARTITIONS),
      EVENT_PARTITION_LEASE_MS: String(LEASE_MS),
    };
    const workers: WorkerProcess[] = [];
    for (let i = 0; i < 2; i++) {
      const worker = await spawnWorker(env, { timeoutMs: 60_000 });
      cleanups.push(async () => {
        const timer = setTimeout(() => void worker.kill9(), 15_000);
        await worker.stop();
        clearTimeout(timer);
      });
      workers.push(worker);
    }
    const [victim, survivor] = workers as [WorkerProcess, WorkerProcess];
    // One partition each once both have seen each other: the first to start gives one up.
    await eventually(
      async () => {
        const holders = await partitionHolders(t.ctx, topology);
        const pids = new Set(holders.values());
        if (holders.size === PARTITIONS && pids.has(victim.child.pid!) && pids.has(survivor.child.pid!)) return true;
        await sleep(200);
        return undefined;
      },
      30_000,
      'each worker to hold one partition',
    );
    const victimPartition = [...(await partitionHolders(t.ctx, topology))].find(([, pid]) => pid === victim.child.pid)![0];
    // replica.stats: each replica answers with the partition its lease says it holds, under the lease's owner name.
    const stats = await eventually(
      async () => {
        const reply = await createPendingProjectorClient(nc, { prefix }).replicaStats({});
        return reply.ok && reply.replicas.length === 2 && reply.replicas.every((r) => r.partitions.length === 1) ? reply.replicas : undefined;
      },
      10_000,
      'replica.stats to show one partition on each replica',
    );
    const statedPartitions = new Map(stats.map((r) => [Number(r.replica.split(':')[1]), r.partitions]));
    for (const [k, pid] of await partitionHolders(t.ctx, topology)) expect(statedPartitions.get(pid)).toEqual([k]);
    const balancedAt = Date.now();

    let producing = true;
    const random = seededRandom(20);
    const producers = [0, 1, 2].map(async () => {
      while (producing) {
        await randomStep(t.ctx, nc, prefix, tasks, random);
        await sleep(5);
      }
    });
    try {
      await sleep(2000);
      // Mid-stream: its unacknowledged events are redelivered (ACK_WAIT_MS 2 s) to whoever takes its partition.
      await victim.kill9();
      await sleep(LEASE_MS + 2000);
    } finally {
      producing = false;
      await Promise.all(producers);
    }

    // The survivor took the dead replica's partition over, and holds both.
    const holders = await eventually(
      async () => {
        const now = await partitionHolders(t.ctx, topology);
        return [...now.values()].filter((pid) => pid === survivor.child.pid).length === PARTITIONS ? now : undefined;
      },
      20_000,
      "the survivor to hold the dead replica's partition",
    );
    expect([...holders.keys()].sort()).toEqual([0, 1]);
    expect(survivor.output()).toMatch(new RegExp(`"partition":${victimPartition},"partitions":${PARTITIONS},[^\\n]*"msg":"pulling an event partition"`));

    await waitQuiet(jsm, topology, eventConsumers(topology, PARTITIONS));
    const verify = await runVerify(t.url);
    expect(verify.stderr, verify.stdout).toMatch(new RegExp(`verified ${TASKS} tasks: 0 drifted`));
    expect(verify.code).toBe(0);

    const { backwards, mismatched, staleBucket, published } = await convergenceFindings(
      nc,
      t.ctx,
      topology,
      tasks.map((x) => x.taskId),
    );
    const report = `balanced after ${((balancedAt - started) / 1000).toFixed(1)} s; killed the holder of partition ${victimPartition}; ${[...published.values()].reduce((n, e) => n + e.length, 0)} summaries published; ${((Date.now() - started) / 1000).toFixed(1)} s`;
    expect(backwards, report).toEqual([]);
    expect(mismatched, report).toEqual([]);
    expect(staleBucket, report).toEqual([]);
    // Both partitions' consumers did the work: each acknowledged every event of the stream.
    const last = (await jsm.streams.info(topology.eventsStream)).state.last_seq;
    for (const name of eventConsumers(topology, PARTITIONS)) expect((await jsm.consumers.info(topology.eventsStream, name)).ack_floor.stream_seq).toBe(last);
    expect(survivor.child.exitCode, survivor.output().slice(-4000)).toBeNull();
    console.info(`event partitions: ${report}`);
  }, 90_000);
});
