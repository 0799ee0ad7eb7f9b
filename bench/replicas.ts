/**
 * `npm run bench:replicas`: (2)'s workload (one event per distinct changed task) against 1, 2 and 4
 * worker processes on one PostgreSQL schema, all sharing one durable consumer, or, with
 * `--partitions`, under each EVENT_PARTITIONS setting listed, compared in the same run. Prints
 * events/s per pair, its ratio to the first pair, and the CPU seconds each process spent per 1,000
 * events.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connectNats } from '../src/bin/connectNats.js';
import { partitionConsumerName } from '../src/contract/eventPartitions.js';
import type { Topology } from '../src/contract/subjects.js';
import { listLiveLeases } from '../src/repository/projection/leases.js';
import { systemClock } from '../src/timestamps.js';
import { benchTopology, benchWorkerConfig, sessionStateChanged, SummaryWatcher, waitProgress } from './bus.js';
import { f2, int, onCleanup, progress, runBench, sleep, WrongAnswerError, type DialectResult, type Row } from './harness.js';
import { openScratchDatabase } from './scratchDatabase.js';
import { seedTasks, sessionStatesOf, settleAfterBulkWrites, toggleTasks } from './seed/seeder.js';
import { WorkerProcess } from './workerProcess.js';

// bench/worker.ts's pool per worker, so one replica here is (2)'s worker.
const PG_POOL = 10;
const TICKS_PER_SECOND = 100;

interface Options {
  tasks: number;
  /** Events per task per round, interleaved across the tasks (1: (2)'s workload). */
  eventsPerTask: number;
  replicas: number[];
  /** EVENT_PARTITIONS settings compared in the same run. */
  partitions: number[];
  rounds: number;
}

/** utime + stime of a process, in seconds, and with its reaped children's too (0 when it is gone). */
function cpuSeconds(pid: number, withReapedChildren = false): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const own = fields[11]! + fields[12]!;
    return (withReapedChildren ? own + fields[13]! + fields[14]! : own) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * CPU seconds of the whole PostgreSQL server so far: the postmaster with its reaped backends, plus
 * every live backend. Backends come and go within a round (pools reconnect); summing only the ones
 * alive at its start would lose the time of those that exited.
 */
function postgresCpu(): number {
  const pids = pidsOf((cmd) => cmd.startsWith('postgres') || cmd.includes('/postgres '));
  const parentOf = (pid: number) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      return 0;
    }
  };
  const set = new Set(pids);
  return pids.reduce((sum, pid) => sum + cpuSeconds(pid, !set.has(parentOf(pid))), 0);
}

/** Pids whose command line matches: the nats-server on the bench's port, and every postgres backend (shared with whatever else runs on the host). */
function pidsOf(match: (cmdline: string) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (match(fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' '))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

const totalCpu = (pids: readonly number[]) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);

function consumersOf(topology: Topology, partitions: number): string[] {
  return partitions > 1 ? Array.from({ length: partitions }, (_, k) => partitionConsumerName(topology, k, partitions)) : [topology.consumer];
}

/** Until every consumer has acknowledged up to `targetSeq` with nothing pending; resolves with performance.now() then. */
function waitAllAcked(jsm: JetStreamManager, topology: Topology, consumers: readonly string[], targetSeq: number): Promise<number> {
  return waitProgress(
    async () => {
      const infos = await Promise.all(consumers.map((c) => jsm.consumers.info(topology.eventsStream, c)));
      const floor = Math.min(...infos.map((i) => i.ack_floor.stream_seq));
      const done = infos.every((i) => i.ack_floor.stream_seq >= targetSeq && i.num_pending === 0 && i.num_ack_pending === 0);
      return { done, progress: infos.reduce((sum, i) => sum + i.ack_floor.stream_seq, 0), state: `ack floor ${floor} of ${targetSeq}` };
    },
    2,
    60_000,
  );
}

/**
 * Until the fresh worker processes stop spending CPU on their start (module loading, the summary
 * bucket's check, the first polls): under 5% of a core each over half a second, or 20 s at most.
 * Otherwise a round's CPU per event would carry each process's start, more of it with more processes.
 */
async function untilIdle(pids: readonly number[]): Promise<void> {
  const deadline = performance.now() + 20_000;
  while (performance.now() < deadline) {
    const before = pids.map((pid) => cpuSeconds(pid));
    await sleep(500);
    if (pids.every((pid, i) => cpuSeconds(pid) - before[i]! < 0.025)) return;
  }
}

interface Round {
  partitions: number;
  replicas: number;
  events: number;
  ms: number;
  /** CPU seconds over the round: each worker process, the nats-server, every postgres process. */
  workerCpu: number[];
  natsCpu: number;
  postgresCpu: number;
}

/** One EVENT_PARTITIONS setting under test: a topology of its own, so its consumers' positions never see another setting's rounds. */
interface Setup {
  partitions: number;
  prefix: string;
  topology: Topology;
  watcher: SummaryWatcher;
  consumers: string[];
  config: ReturnType<typeof benchWorkerConfig>;
}

async function measurePostgres(options: Options, postgresUrl: string, natsUrl: string): Promise<DialectResult> {
  const scratch = await openScratchDatabase('postgres', { postgresUrl, maxConnections: PG_POOL, schemaPrefix: 'bench_replicas_' });
  onCleanup(() => scratch.drop());
  const nc = await connectNats({ natsUrl }, 'bench-replicas-client');
  onCleanup(() => nc.drain());
  const jsm = await jetstreamManager(nc);
  const seeded = await seedTasks(scratch.ctx, { tasks: options.tasks, toggleBelow: options.tasks });
  const ids = seeded.taskIds;
  const start = (setup: Setup) =>
    WorkerProcess.start({ databaseUrl: scratch.url, searchPath: scratch.searchPath, maxConnections: PG_POOL, natsUrl, config: setup.config });
  const setups: Setup[] = [];
  for (const partitions of options.partitions) {
    const { prefix, topology } = benchTopology(nc, 'benchrep', 'postgres');
    const watcher = new SummaryWatcher(nc, topology);
    onCleanup(async () => watcher.stop());
    const config = benchWorkerConfig(prefix, { projectionBatchSize: 16, reconcilePageSize: 500, bootReconcile: false, eventPartitions: partitions });
    const setup = { partitions, prefix, topology, watcher, consumers: consumersOf(topology, partitions), config };
    progress(`[postgres] ${scratch.where}; NATS ${natsUrl}; EVENT_PARTITIONS=${partitions} on prefix ${prefix}`);
    // The first start creates the topology.
    await (await start(setup)).stop();
    setups.push(setup);
  }
  const natsPort = new URL(natsUrl).port || '4222';
  const natsPids = pidsOf((cmd) => cmd.includes('nats-server') && cmd.includes(natsPort));

  // Rounds 1, 2, 4, then 4, 2, 1, each count under every setting, the settings' order flipping
  // from one count to the next: a neighbour's load drifting over the run hits every pair alike.
  const order = [...options.replicas, ...[...options.replicas].reverse()];
  const plan = Array.from({ length: options.rounds }, () => order)
    .flat()
    .flatMap((replicas, i) => (i % 2 === 0 ? setups : [...setups].reverse()).map((setup) => ({ replicas, setup })));
  const rounds: Round[] = [];
  for (const { replicas, setup } of plan) {
    const { partitions, topology, watcher, consumers } = setup;
    const workers = await Promise.all(Array.from({ length: replicas }, () => start(setup)));
    const stopAll = onCleanup(() => Promise.all(workers.map((w) => w.stop())));
    try {
      await toggleTasks(scratch.ctx, ids, systemClock());
      await settleAfterBulkWrites(scratch.ctx);
      // Partition owners claim their leases within a heartbeat of starting.
      if (partitions > 1) {
        const balanced = async () => {
          const held = await listLiveLeases(scratch.ctx, `event_partition.${topology.consumer}-`);
          return held.length === partitions && new Set(held.map((l) => l.owner)).size === Math.min(replicas, partitions);
        };
        await waitProgress(async () => ({ done: await balanced(), progress: 0, state: 'partitions not yet spread over the replicas' }), 100, 60_000);
      }
      await untilIdle(workers.map((w) => w.pid));
      progress(`[postgres] P=${partitions}, ${replicas} replica(s): ${ids.length * options.eventsPerTask} events, ${options.eventsPerTask} per changed task`);
      const seq0 = (await jsm.streams.info(topology.eventsStream)).state.last_seq;
      const before = watcher.received;
      const pids = workers.map((w) => w.pid);
      const cpu0 = { workers: pids.map((pid) => cpuSeconds(pid)), nats: totalCpu(natsPids), postgres: postgresCpu() };
      const subject = `${setup.prefix}task_session.state_changed`;
      const states = await sessionStatesOf(scratch.ctx, ids);
      const started = performance.now();
      for (let k = 0; k < options.eventsPerTask; k++) {
        for (const id of ids) nc.publish(subject, sessionStateChanged(id, seeded.sessionOf.get(id), states.get(id)));
      }
      await nc.flush();
      const events = ids.length * options.eventsPerTask;
      const done = await waitAllAcked(jsm, topology, consumers, seq0 + events);
      if (!(await watcher.waitReceived(before, ids.length)))
        throw new WrongAnswerError(`${watcher.received - before} summaries for ${ids.length} changed tasks`);
      rounds.push({
        partitions,
        replicas,
        events,
        ms: done - started,
        workerCpu: pids.map((pid, i) => cpuSeconds(pid) - cpu0.workers[i]!),
        natsCpu: totalCpu(natsPids) - cpu0.nats,
        postgresCpu: postgresCpu() - cpu0.postgres,
      });
    } finally {
      await stopAll();
    }
  }
  return report(options, rounds);
}

function report(options: Options, rounds: readonly Round[]): DialectResult {
  const pairs = options.partitions.flatMap((partitions) => options.replicas.map((replicas) => ({ partitions, replicas })));
  const figures = pairs.map(({ partitions, replicas }) => {
    const mine = rounds.filter((r) => r.replicas === replicas && r.partitions === partitions);
    const events = mine.reduce((s, r) => s + r.events, 0);
    const ms = mine.reduce((s, r) => s + r.ms, 0);
    const per1k = (cpu: number) => (cpu * 1000) / events;
    return {
      label: `P=${partitions}, ${replicas} replica(s)`,
      rate: (events * 1000) / ms,
      perRound: mine.map((r) => (r.events * 1000) / r.ms),
      workerCpu: Array.from({ length: replicas }, (_, i) => per1k(mine.reduce((s, r) => s + r.workerCpu[i]!, 0))),
      natsCpu: per1k(mine.reduce((s, r) => s + r.natsCpu, 0)),
      postgresCpu: per1k(mine.reduce((s, r) => s + r.postgresCpu, 0)),
      wallPer1k: ms / events,
    };
  });
  const base = figures[0]!;
  const rows: Row[] = figures.flatMap((c): Row[] => [
    [`${c.label}: events/s`, int(c.rate), '', `rounds ${c.perRound.map(int).join(', ')}`],
    [`${c.label}: ratio to ${base.label}`, `${f2(c.rate / base.rate)}x`, '', ''],
    [`${c.label}: CPU s / 1k events, workers`, c.workerCpu.map(f2).join(' + '), '', `wall ${f2(c.wallPer1k)} s / 1k`],
    [`${c.label}: CPU s / 1k events, nats / postgres`, `${f2(c.natsCpu)} / ${f2(c.postgresCpu)}`, '', ''],
  ]);
  return {
    dialect: 'postgres',
    heading: `EVENT_PARTITIONS ${options.partitions.join(', ')} (1: one shared durable consumer)`,
    intro: [
      `  ${options.tasks} tasks x ${options.eventsPerTask} event(s) per round, ${options.rounds * 2} rounds per pair; pool ${PG_POOL} per worker; postgres CPU is every postgres process on the host`,
    ],
    rows,
    summary: figures.map((c) => [`${c.label}, events/s (ratio)`, `${int(c.rate)} (${f2(c.rate / base.rate)}x)`, ''] as const),
    checks: [],
  };
}

runBench<Options>({
  script: 'bench:replicas',
  title: "(2)'s workload against 1, 2 and 4 worker processes on one PostgreSQL database",
  options: {
    tasks: { arg: '<n>', default: '2000', help: 'distinct changed tasks per round' },
    'events-per-task': { arg: '<n>', default: '1', help: "events per task per round, interleaved across the tasks (1: (2)'s workload)" },
    replicas: { arg: '<list>', default: '1,2,4', help: 'worker process counts, comma separated' },
    partitions: { arg: '<list>', default: '1', help: 'EVENT_PARTITIONS settings compared in the same run, comma separated (1: one shared durable consumer)' },
    rounds: { arg: '<n>', default: '1', help: 'times the ascending-then-descending order of counts runs' },
  },
  parse(read) {
    const list = (name: string, max: number) => {
      const values = (read.string(name) ?? '').split(',').map(Number);
      if (values.some((n) => !Number.isInteger(n) || n < 1 || n > max)) read.problem(`--${name} must list integers in [1, ${max}]`);
      return values;
    };
    const replicas = list('replicas', 16);
    return {
      tasks: read.int('tasks', 10),
      eventsPerTask: read.int('events-per-task', 1),
      replicas,
      partitions: list('partitions', 64),
      rounds: read.int('rounds', 1),
    };
  },
  async measure(dialect, options, services): Promise<DialectResult> {
    if (dialect === 'sqlite') {
      return {
        dialect,
        heading: 'not measured',
        intro: ['  one worker process per SQLite file (ADR 0017): there is nothing to share'],
        rows: [],
        summary: options.partitions.flatMap((p) => options.replicas.map((n) => [`P=${p}, ${n} replica(s), events/s (ratio)`, 'n/a', ''] as const)),
        checks: [],
      };
    }
    return measurePostgres(options, services.postgresUrl, services.natsUrl);
  },
});
