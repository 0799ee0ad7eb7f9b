/**
 * The measurements of the worker benchmark, one function each. Every throughput figure is
 * "count / elapsed" of one uninterrupted run; every latency list is in milliseconds.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import type { Topology } from '../src/events/subjects.js';
import type { SummaryPublisher } from '../src/projectors/ports.js';
import { projectTask } from '../src/projectors/projectTasks.js';
import type { RepositoryContext } from '../src/repository/context.js';
import { loadTaskPendingStates } from '../src/repository/pendingActions.js';
import { createProjectionStore } from '../src/repository/projectionStore.js';
import { loadStatusSummaries } from '../src/repository/statusSummaries.js';
import type { WorkerHandle } from '../src/bin/worker.js';
import { ConsumerStalledError, ackProgress, encodeEvent, lastEventSeq, sleep, waitAcked, type SummaryWatcher } from './workerNats.js';
import type { MemorySample } from './workerProcess.js';
import { createRng } from './seedPlan.js';
import { recordGc, summarizeGc, type GcEntry, type GcSummary } from './processTrace.js';
import { listTaskIdsAfter } from '../src/repository/tasks.js';
import { timestampToMicros } from '../src/timestamps.js';

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

export class WrongAnswerError extends Error {
  override name = 'WrongAnswerError';
}

/** Nearest-rank percentile of an unsorted list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** (1) One projection's work per task, `concurrency` at a time: projectTask straight, no bus in. */
export async function measureLimit(env: BenchEnv, publisher: SummaryPublisher, taskIds: readonly string[], concurrency: number): Promise<Rate> {
  const deps = { store: createProjectionStore(env.ctx), publisher, logger: env.logger };
  let next = 0;
  let unexpected = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < taskIds.length) {
        const result = await projectTask(deps, taskIds[next++]!);
        if (result.outcome !== 'changed') unexpected++;
      }
    }),
  );
  const ms = performance.now() - started;
  if (unexpected > 0) throw new WrongAnswerError(`limit: ${unexpected} of ${taskIds.length} projections did not change the summary`);
  return { count: taskIds.length, ms };
}

function stateChanged(env: BenchEnv, taskId: string): Uint8Array {
  return encodeEvent('task_session.state_changed', { task_id: taskId, session_id: env.sessionOf.get(taskId), state: 'RUNNING' });
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
  let last = -1;
  let movedAt = performance.now();
  for (;;) {
    const n = (await settled()) - settled0;
    if (n >= count) break;
    const now = performance.now();
    if (n !== last) {
      last = n;
      movedAt = now;
    } else if (now - movedAt > stallMs) {
      const p = await ackProgress(env.jsm, env.topology);
      throw new ConsumerStalledError(`worker settled ${n} of ${count} events and made no progress for ${stallMs} ms (consumer: ${JSON.stringify(p)})`);
    }
    await sleep(2);
  }
  return waitAcked(env.jsm, env.topology, seq0 + count, { pollMs: 2, stallMs });
}

/**
 * Publishes prepared events (subject, payload) through core NATS, as Kandev does, and resolves when
 * the worker's consumer has acknowledged every one of them.
 */
async function publishAndWait(env: BenchEnv, events: ReadonlyArray<[string, Uint8Array]>): Promise<Rate> {
  const seq0 = await lastEventSeq(env.jsm, env.topology);
  const settled0 = await settledEvents(env);
  const started = performance.now();
  for (const [subject, payload] of events) env.nc.publish(subject, payload);
  await env.nc.flush();
  const done = await waitSettled(env, seq0, settled0, events.length);
  return { count: events.length, ms: done - started };
}

/** (2) One event per distinct task whose state changed; every one must yield a summary. */
export async function measureDistinct(env: BenchEnv, taskIds: readonly string[]): Promise<Rate> {
  const subject = `${env.topology.prefix}task_session.state_changed`;
  const events = taskIds.map((id): [string, Uint8Array] => [subject, stateChanged(env, id)]);
  const before = env.watcher.received;
  const rate = await publishAndWait(env, events);
  if (!(await env.watcher.waitReceived(before, taskIds.length))) {
    throw new WrongAnswerError(`distinct: ${env.watcher.received - before} summaries for ${taskIds.length} changed tasks`);
  }
  return rate;
}

async function projectionsSoFar(worker: WorkerHandle): Promise<number> {
  return (await worker.metrics.projections.get()).values.reduce((sum, v) => sum + v.value, 0);
}

/** (3) `length` events per task, task after task; returns the rate and the projections used. */
export async function measureBursts(env: BenchEnv, worker: WorkerHandle, taskIds: readonly string[], length: number): Promise<{ rate: Rate; projections: number }> {
  const subject = `${env.topology.prefix}message.added`;
  const events: Array<[string, Uint8Array]> = [];
  for (const taskId of taskIds) {
    for (let k = 0; k < length; k++) {
      events.push([subject, encodeEvent('message.added', { task_id: taskId, session_id: env.sessionOf.get(taskId), type: 'clarification_request', requests_input: true })]);
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

export interface LatencyResult {
  samples: number[];
  /**
   * Each sample split at the instant the worker read the task's state (the summary's updated_at,
   * the worker's wall clock, millisecond resolution): publish -> read covers the stream, delivery
   * and the wait for a projection transaction; read -> received covers the compare-and-set, the
   * summary publish and its delivery to this client.
   */
  beforeRead: number[];
  afterRead: number[];
  /** When each sample was published, in ms since the first publish (aligned with `samples`). */
  sentAt: number[];
  achievedRate: number;
  /** When the first event was published, in ms since the epoch (to place another process's GCs). */
  startedAtEpochMs: number;
  /** This (client) process's event-loop delay over the phase. */
  clientLoopDelayMs: { p99: number; max: number };
  /** This process's garbage collections over the phase: minor (scavenges) and major, with total and longest pause (ms). */
  clientGc: GcSummary;
}

/**
 * (4) A paced publisher at `ratePerSecond`: one state_changed event per changed task, latency from
 * the publish call to the summary's arrival at a client.
 */
export async function measureLatency(env: BenchEnv, taskIds: readonly string[], ratePerSecond: number): Promise<LatencyResult> {
  const subject = `${env.topology.prefix}task_session.state_changed`;
  const payloads = taskIds.map((id) => stateChanged(env, id));
  const count = taskIds.length;
  const indexOf = new Map(taskIds.map((id, i) => [id, i]));
  // Everything the phase records goes into arrays allocated here, so the phase retains nothing per
  // arrival. It used to keep each summary's payload for a parse afterwards, and a payload is a view
  // of the socket chunk it arrived in: the chunks it pinned grew the old generation until this
  // process ran a major GC mid-phase, whose pause and marking threads (on a 2-core host) made the
  // largest tail episode of every run that missed the target.
  const sentAt = new Float64Array(count).fill(Number.NaN);
  const arrivedAt = new Float64Array(count).fill(Number.NaN);
  const readAt = new Float64Array(count).fill(Number.NaN);
  const arrivalOrder = new Int32Array(count);
  let arrived = 0;
  // Arrivals are timestamped on this process's event loop: a stall here inflates the samples.
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const gcEntries: GcEntry[] = [];
  const stopGcRecord = recordGc((entry) => gcEntries.push(entry));
  env.watcher.listen((id, at, payload) => {
    const i = indexOf.get(id);
    // The first summary after the event was published is its sample.
    if (i === undefined || Number.isNaN(sentAt[i]!) || !Number.isNaN(arrivedAt[i]!)) return;
    arrivedAt[i] = at;
    readAt[i] = readInstantMs(payload);
    arrivalOrder[arrived++] = i;
  });
  try {
    const intervalMs = 1000 / ratePerSecond;
    (globalThis as { gc?: () => void }).gc?.();
    // A full collection leaves its sweeping to helper threads: on a 2-core host they would take CPU
    // from the worker, nats-server and the database through the first samples.
    await sleep(AFTER_GC_MS);
    const started = performance.now();
    for (let i = 0; i < count; ) {
      const now = performance.now();
      const due = started + i * intervalMs;
      if (now < due) {
        await sleep(Math.max(0, due - now));
        continue;
      }
      // Catch up on every slot that is due (timers fire late by a millisecond or so).
      while (i < count && started + i * intervalMs <= performance.now()) {
        sentAt[i] = performance.now();
        env.nc.publish(subject, payloads[i]!);
        i++;
      }
    }
    const achievedRate = (count * 1000) / (performance.now() - started);
    const deadline = performance.now() + 30_000;
    while (arrived < count) {
      if (performance.now() > deadline) throw new WrongAnswerError(`latency: ${arrived} summaries for ${count} changed tasks after 30 s`);
      await sleep(5);
    }
    const samples: number[] = [];
    const sentOffsets: number[] = [];
    const beforeRead: number[] = [];
    const afterRead: number[] = [];
    for (const i of arrivalOrder) {
      const t0 = sentAt[i]!;
      samples.push(arrivedAt[i]! - t0);
      sentOffsets.push(t0 - started);
      beforeRead.push(readAt[i]! - t0);
      afterRead.push(arrivedAt[i]! - readAt[i]!);
    }
    // The observer reports asynchronously: let the phase's last collections arrive.
    await sleep(0);
    const startedAtEpochMs = performance.timeOrigin + started;
    return {
      samples,
      beforeRead,
      afterRead,
      sentAt: sentOffsets,
      achievedRate,
      startedAtEpochMs,
      clientLoopDelayMs: { p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
      clientGc: summarizeGc(gcEntries, startedAtEpochMs),
    };
  } finally {
    loop.disable();
    stopGcRecord();
    env.watcher.listen(undefined);
  }
}

/** Quiet time after this process's full collection before a timed phase begins. */
const AFTER_GC_MS = 250;

const UPDATED_AT_KEY = new TextEncoder().encode('"updated_at":"');
const QUOTE = 0x22;
const latin1 = new TextDecoder('latin1');

/**
 * When the worker read the task's state, on this process's performance clock: the summary's
 * updated_at, found in the payload bytes without parsing the envelope (a summary this benchmark's
 * worker published carries one updated_at, a JSON string without escapes).
 */
function readInstantMs(payload: Uint8Array): number {
  const first = UPDATED_AT_KEY[0]!;
  for (let at = payload.indexOf(first); at >= 0; at = payload.indexOf(first, at + 1)) {
    let k = 1;
    while (k < UPDATED_AT_KEY.length && payload[at + k] === UPDATED_AT_KEY[k]) k++;
    if (k < UPDATED_AT_KEY.length) continue;
    const start = at + k;
    const end = payload.indexOf(QUOTE, start);
    if (end < 0) break;
    return timestampToMicros(latin1.decode(payload.subarray(start, end))) / 1000 - performance.timeOrigin;
  }
  throw new WrongAnswerError('latency: a summary without updated_at');
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
 * publish with dedupe id, then KV put) with `inFlight` at a time, as a reconcile page of repairs
 * has them, and no database: the most repairs per second any boot reconcile could publish.
 */
export async function measurePublishCeiling(publisher: SummaryPublisher, count: number, inFlight: number): Promise<Rate> {
  const started = performance.now();
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) {
      await publisher.publishSummary({
        taskId: `ceiling-${String(i).padStart(7, '0')}`,
        workspaceId: 'ws-ceiling',
        summary: { pending_action: 'clarification', revision: 1, updated_at: '2026-11-30T00:00:00.000000000Z' },
      });
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { count, ms: performance.now() - started };
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
      encodeEvent('message.updated', { task_id: taskId, session_id: sessionId, message_id: `stream-${k % 997}`, type: 'message', requests_input: false, content: 'Looking at the failing test, the fixture builds the session before' }),
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
    for (let sent = 0; sent < count; ) {
      const n = Math.min(batch, count - sent);
      for (let i = 0; i < n; i++) {
        const [subject, payload] = makeEvent(sent + i);
        env.nc.publish(subject, payload);
      }
      sent += n;
      await env.nc.flush();
      let waitedMs = 0;
      const behind = midAt !== undefined && sent === midAt ? sent : sent - 3 * batch;
      while ((await settledCount()) - settled0 < behind) {
        if ((waitedMs += 5) > 60_000) throw new ConsumerStalledError(`worker stuck at ${(await settledCount()) - settled0} of ${sent} events`);
        await sleep(5);
      }
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

export interface TailEpisodes {
  /** Samples above the threshold. */
  count: number;
  /** Runs of them, split where publishes were more than `gapMs` apart. */
  episodes: number;
  /**
   * The run holding the most of them: its sample count, first publish (ms into the phase, and which
   * event of the phase, counting from 1), span and worst latency (ms).
   */
  largest: { count: number; startMs: number; startEvent: number; spanMs: number; maxMs: number } | undefined;
}

/**
 * Where a latency tail comes from: samples above `thresholdMs`, grouped by when they were published.
 * A few dense episodes mean a stall and the backlog it left (at half the worker's capacity a backlog
 * takes about as long to drain as the stall lasted); a thin spread means steady-state queueing.
 */
export function tailEpisodes(samples: readonly number[], sentAt: readonly number[], thresholdMs: number, gapMs = 100): TailEpisodes {
  const slow = sentAt
    .map((at, i) => ({ at, ms: samples[i]! }))
    .filter((s) => s.ms > thresholdMs)
    .sort((a, b) => a.at - b.at);
  const runs: Array<Array<{ at: number; ms: number }>> = [];
  for (const s of slow) {
    const run = runs[runs.length - 1];
    if (run && s.at - run[run.length - 1]!.at <= gapMs) run.push(s);
    else runs.push([s]);
  }
  const largest = runs.reduce<(typeof runs)[number] | undefined>((best, run) => (!best || run.length > best.length ? run : best), undefined);
  return {
    count: slow.length,
    episodes: runs.length,
    largest: largest && {
      count: largest.length,
      startMs: largest[0]!.at,
      // Events are published in order, so the ones published before it say which it was.
      startEvent: sentAt.filter((at) => at < largest[0]!.at).length + 1,
      spanMs: largest[largest.length - 1]!.at - largest[0]!.at,
      maxMs: Math.max(...largest.map((s) => s.ms)),
    },
  };
}
