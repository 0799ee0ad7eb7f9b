/**
 * The measurements of the worker benchmark, one function each. Every throughput figure is
 * "count / elapsed" of one uninterrupted run; every latency list is in milliseconds.
 */
import { performance } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { createProjectionStore, type ProjectionStore } from '../src/repository/projection/projectionStore.js';
import type { Topology } from '../src/contract/subjects.js';
import type { SummaryPublisher } from '../src/projectors/ports.js';
import { projectTask } from '../src/projectors/projectTasks.js';
import type { RepositoryContext } from '../src/repository/context.js';
import { loadTaskPendingStates } from '../src/repository/projection/pendingActions.js';
import { loadStatusSummaries } from '../src/repository/projection/statusSummaries.js';
import { listTaskIdsAfter } from '../src/repository/tasks/tasks.js';
import type { WorkerHandle } from '../src/bin/worker.js';
import { encodeEvent, lastEventSeq, sessionStateChanged, waitAcked, waitProgress, type SummaryWatcher } from './bus.js';
import { sessionStatesOf } from './seed/seeder.js';
import type { MemorySample } from './workerProcess.js';
import { WrongAnswerError, inFlight, sleep } from './harness.js';
import { createRng } from './seed/random.js';

export interface BenchEnv {
  ctx: RepositoryContext;
  /** The connection Kandev and UI clients use (events in, summaries out). */
  nc: NatsConnection;
  jsm: JetStreamManager;
  topology: Topology;
  watcher: SummaryWatcher;
  sessionOf: Map<string, string>;
  logger: Logger;
  /** The worker under test (its settled-event counter ends the throughput runs). */
  worker?: WorkerHandle;
}

export interface Rate {
  count: number;
  ms: number;
}

export const perSecond = (r: Rate) => (r.count * 1000) / r.ms;
export const addRates = (a: Rate, b: Rate): Rate => ({ count: a.count + b.count, ms: a.ms + b.ms });

/** (1) One projection's work per task, `concurrency` at a time: projectTask straight, no bus in. */
export async function measureLimit(
  env: BenchEnv,
  publisher: SummaryPublisher,
  taskIds: readonly string[],
  concurrency: number,
  store: ProjectionStore = createProjectionStore(env.ctx),
): Promise<Rate> {
  const deps = { store, publisher, logger: env.logger };
  let unexpected = 0;
  const rate = await inFlight(taskIds, concurrency, async (taskId) => {
    if ((await projectTask(deps, taskId)).outcome !== 'changed') unexpected++;
  });
  if (unexpected > 0) throw new WrongAnswerError(`limit: ${unexpected} of ${taskIds.length} projections did not change the summary`);
  return { count: taskIds.length, ms: (taskIds.length * 1000) / rate };
}

/**
 * The projection store without the record of this service's summary writes (ADR 0018): no read of
 * it, no write to it. Only to price the record against (1); the projection is otherwise the same.
 */
export function storeWithoutWriteRecord(ctx: RepositoryContext): ProjectionStore {
  const store = createProjectionStore(ctx);
  return {
    ...store,
    withTransaction: (fn) =>
      store.withTransaction((tx) =>
        fn({ ...tx, readSummaryWrites: async () => new Map(), recordSummaryWrites: async () => undefined, recordForeignSummaryWrites: async () => undefined }),
      ),
  };
}

/** Events the worker has settled (acked, or dead-lettered) since it started: its own counter. */
export async function settledEvents(env: BenchEnv): Promise<number> {
  if (!env.worker) throw new Error('no worker under test');
  return (await env.worker.metrics.events.get()).values.reduce((sum, v) => (v.labels.outcome === 'retried' ? sum : sum + v.value), 0);
}

/**
 * Waits until the worker has settled `count` more events than `settled0`, then until the durable
 * consumer confirms every event up to `seq0 + count` acknowledged; resolves with performance.now()
 * at that confirmation. The first wait reads an in-process counter (no request on the loop under
 * test); the server is asked only at the end, so polling costs the worker next to nothing.
 */
export async function waitSettled(
  env: BenchEnv,
  seq0: number,
  settled0: number,
  count: number,
  settled: () => Promise<number> = () => settledEvents(env),
  stallMs = 60_000,
): Promise<number> {
  await waitProgress(
    async () => {
      const n = (await settled()) - settled0;
      return { done: n >= count, progress: n, state: `the worker settled ${n} of ${count} events` };
    },
    2,
    stallMs,
  );
  return waitAcked(env.jsm, env.topology, seq0 + count, 2, stallMs);
}

/**
 * Publishes prepared events (subject, payload) through core NATS, as Kandev does, and resolves when
 * the worker's consumer has acknowledged every one of them.
 */
async function publishAndWait(
  env: BenchEnv,
  events: ReadonlyArray<[string, Uint8Array]>,
  settled: () => Promise<number> = () => settledEvents(env),
): Promise<Rate> {
  const seq0 = await lastEventSeq(env.jsm, env.topology);
  const settled0 = await settled();
  const started = performance.now();
  for (const [subject, payload] of events) env.nc.publish(subject, payload);
  await env.nc.flush();
  const done = await waitSettled(env, seq0, settled0, events.length, settled);
  return { count: events.length, ms: done - started };
}

/**
 * (2) One event per distinct task whose state changed; every one must yield a summary. `settled`
 * counts the events settled by what consumes them (the worker under test unless given: the floor).
 */
export async function measureDistinct(env: BenchEnv, taskIds: readonly string[], settled?: () => Promise<number>): Promise<Rate> {
  const subject = `${env.topology.prefix}task_session.state_changed`;
  const states = await sessionStatesOf(env.ctx, taskIds);
  const events = taskIds.map((id): [string, Uint8Array] => [subject, sessionStateChanged(id, env.sessionOf.get(id), states.get(id))]);
  const before = env.watcher.received;
  const rate = await publishAndWait(env, events, settled);
  if (!(await env.watcher.waitReceived(before, taskIds.length))) {
    throw new WrongAnswerError(`distinct: ${env.watcher.received - before} summaries for ${taskIds.length} changed tasks`);
  }
  return rate;
}

async function projectionsSoFar(worker: WorkerHandle): Promise<number> {
  return (await worker.metrics.projections.get()).values.reduce((sum, v) => sum + v.value, 0);
}

/** (3) `length` events per task, task after task; returns the rate and the projections used. */
export async function measureBursts(
  env: BenchEnv,
  worker: WorkerHandle,
  taskIds: readonly string[],
  length: number,
): Promise<{ rate: Rate; projections: number }> {
  const subject = `${env.topology.prefix}message.added`;
  const events: Array<[string, Uint8Array]> = [];
  for (const taskId of taskIds) {
    for (let k = 0; k < length; k++) {
      events.push([
        subject,
        encodeEvent('message.added', { task_id: taskId, session_id: env.sessionOf.get(taskId), type: 'clarification_request', requests_input: true }),
      ]);
    }
  }
  const projections0 = await projectionsSoFar(worker);
  const before = env.watcher.received;
  const rate = await publishAndWait(env, events);
  await worker.projector.whenIdle();
  if (!(await env.watcher.waitReceived(before, taskIds.length))) {
    throw new WrongAnswerError(`bursts: ${env.watcher.received - before} summaries for ${taskIds.length} changed tasks`);
  }
  return { rate, projections: (await projectionsSoFar(worker)) - projections0 };
}

/** A bare round trip, one at a time: projectTask (reread, CAS, publish) until a client has the summary. */
export async function measureBareRoundTrips(env: BenchEnv, publisher: SummaryPublisher, taskIds: readonly string[]): Promise<number[]> {
  const deps = { store: createProjectionStore(env.ctx), publisher, logger: env.logger };
  const samples: number[] = [];
  try {
    for (const taskId of taskIds) {
      let arrived!: () => void;
      const seen = new Promise<void>((resolve) => (arrived = resolve));
      env.watcher.listen((id) => {
        if (id === taskId) arrived();
      });
      const started = performance.now();
      const result = await projectTask(deps, taskId);
      if (result.outcome !== 'changed') throw new WrongAnswerError(`bare round trip: ${taskId} ${result.outcome}`);
      const timeout = sleep(10_000).then(() => {
        throw new WrongAnswerError(`bare round trip: no summary for ${taskId} within 10 s`);
      });
      await Promise.race([seen, timeout]);
      samples.push(performance.now() - started);
    }
  } finally {
    env.watcher.listen(undefined);
  }
  return samples;
}

/**
 * (5b) The reads reconcile needs, page by page, with nothing written or published: listTaskIdsAfter,
 * then loadTaskPendingStates and loadStatusSummaries side by side (as findDrift issues them).
 */
export async function measureBareKeysetReads(ctx: RepositoryContext, pageSize: number): Promise<Rate> {
  let after: string | null = null;
  let visited = 0;
  const started = performance.now();
  for (;;) {
    const page = await listTaskIdsAfter(ctx, after, pageSize);
    if (page.length === 0) break;
    const [states] = await Promise.all([loadTaskPendingStates(ctx, page), loadStatusSummaries(ctx, page)]);
    if (states.size !== page.length) throw new WrongAnswerError(`bare reads: ${states.size} states for a page of ${page.length}`);
    visited += page.length;
    after = page[page.length - 1]!;
  }
  return { count: visited, ms: performance.now() - started };
}

/**
 * (5e) The bus alone: `count` full summary replacements through the worker's publisher (JetStream
 * publish with dedupe id, then KV put) with `concurrency` at a time, as a reconcile page of repairs
 * has them, and no database: the most repairs per second any boot reconcile could publish.
 */
export async function measurePublishCeiling(publisher: SummaryPublisher, count: number, concurrency: number): Promise<Rate> {
  const summary = { pending_action: 'clarification', revision: 1, updated_at: '2026-11-30T00:00:00.000000000Z' } as const;
  const keys = Array.from({ length: count }, (_, i) => `ceiling-${String(i).padStart(7, '0')}`);
  const rate = await inFlight(keys, concurrency, (taskId) => publisher.publishSummary({ taskId, workspaceId: 'ws-ceiling', summary }));
  return { count, ms: (count * 1000) / rate };
}

/** What the memory measurement needs from the worker process under test. */
export interface MemoryProbe {
  /** Events settled so far, and the process's RSS right now (no gc). */
  settled(): Promise<{ settled: number; rss: number }>;
  /** Settled events and memory after global.gc(). */
  sample(): Promise<{ settled: number; memory: MemorySample }>;
}

export interface MemoryResult {
  warmupEvents: number;
  events: number;
  midEvents: number;
  relevantEvents: number;
  warm: MemorySample;
  mid: MemorySample;
  after: MemorySample;
  peakRss: number;
  wallMs: number;
}

export const mb = (bytes: number) => bytes / (1024 * 1024);

/**
 * (6) Streams `events` events through the worker process after `warmup` events: 95% streaming
 * `message.updated` of ordinary messages (acked unread), 5% pending-sensitive events over
 * `hotTasks`. Published in batches of 5,000, at most three batches ahead of what the worker has
 * settled, so JetStream and the worker keep up instead of the stream piling up. Memory is sampled
 * (after gc) once warm, after `midEvents` of the run, and at the end.
 */
export async function measureMemory(
  env: BenchEnv,
  probe: MemoryProbe,
  hotTasks: readonly string[],
  counts: { warmup: number; events: number; midEvents: number },
  onProgress: (done: number, rss: number) => void,
): Promise<MemoryResult> {
  const rng = createRng(0x3e3);
  const batch = 5000;
  const prefix = env.topology.prefix;
  let relevant = 0;
  const relevantTypes = ['message.added', 'turn.completed', 'task_session.state_changed', 'permission_request.received'];
  const makeEvent = (k: number): [string, Uint8Array] => {
    const taskId = hotTasks[Math.floor(rng() * hotTasks.length)]!;
    const sessionId = env.sessionOf.get(taskId);
    if (rng() < 0.05) {
      relevant++;
      const type = relevantTypes[k % relevantTypes.length]!;
      return [`${prefix}${type}`, encodeEvent(type, { task_id: taskId, session_id: sessionId, type: 'clarification_request', requests_input: true })];
    }
    return [
      `${prefix}message.updated`,
      encodeEvent('message.updated', {
        task_id: taskId,
        session_id: sessionId,
        message_id: `stream-${k % 997}`,
        type: 'message',
        requests_input: false,
        content: 'Looking at the failing test, the fixture builds the session before',
      }),
    ];
  };
  let peakRss = 0;
  const settledCount = async () => {
    const { settled, rss } = await probe.settled();
    peakRss = Math.max(peakRss, rss);
    return settled;
  };
  let mid: MemorySample | undefined;
  const stream = async (count: number, midAt: number | undefined, report: boolean): Promise<number> => {
    const seq0 = await lastEventSeq(env.jsm, env.topology);
    const settled0 = await settledCount();
    let pausedMs = 0;
    const started = performance.now();
    for (let sent = 0; sent < count;) {
      const n = Math.min(batch, count - sent);
      for (let i = 0; i < n; i++) {
        const [subject, payload] = makeEvent(sent + i);
        env.nc.publish(subject, payload);
      }
      sent += n;
      await env.nc.flush();
      const behind = midAt !== undefined && sent === midAt ? sent : sent - 3 * batch;
      const caughtUp = async () => {
        const settled = (await settledCount()) - settled0;
        return { done: settled >= behind, progress: settled, state: `the worker settled ${settled} of ${sent} events` };
      };
      await waitProgress(caughtUp, 5, 60_000);
      if (midAt !== undefined && sent === midAt) {
        const pause = performance.now();
        mid = (await probe.sample()).memory;
        pausedMs += performance.now() - pause;
      }
      if (report) onProgress(sent, peakRss);
    }
    const done = await waitSettled(env, seq0, settled0, count, settledCount);
    return done - started - pausedMs;
  };
  await stream(counts.warmup, undefined, false);
  const warm = (await probe.sample()).memory;
  relevant = 0;
  peakRss = 0;
  const midAt = Math.ceil(counts.midEvents / batch) * batch;
  const wallMs = await stream(counts.events, midAt < counts.events ? midAt : undefined, true);
  const after = (await probe.sample()).memory;
  return {
    warmupEvents: counts.warmup,
    events: counts.events,
    midEvents: mid ? midAt : counts.events,
    relevantEvents: relevant,
    warm,
    mid: mid ?? after,
    after,
    peakRss: Math.max(peakRss, after.rss),
    wallMs,
  };
}
