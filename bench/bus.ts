/**
 * The bus side every bench shares: a worker's settings under a random subject prefix and the
 * removal of its streams, one bus round trip to an echo responder, a Kandev-like event publisher,
 * a client that watches the summary subject, and the consumer-progress probe every throughput
 * figure of the worker bench ends on.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { WorkerConfig } from '../src/bin/worker.js';
import { SETTINGS } from '../src/config.js';
import { topologyFor, topologyStreams, type Topology } from '../src/contract/subjects.js';
import type { DialectName } from '../src/repository/dialect.js';
import { onCleanup, sleep, timeEach, type Timed } from './harness.js';

const encoder = new TextEncoder();

/** A Kandev bus envelope, encoded. */
export function encodeEvent(type: string, data: Record<string, unknown>): Uint8Array {
  return encoder.encode(JSON.stringify({ id: randomUUID(), type, subject: type, source: 'bench', timestamp: new Date().toISOString(), data }));
}

/**
 * Kandev's `task_session.state_changed` for a session the bench toggled between RUNNING and IDLE: the
 * state it is in now, and the other as the one it left. A move to IDLE wakes the session's prompt
 * dispatcher, as it does in production; a move to RUNNING does not.
 */
export function sessionStateChanged(taskId: string, sessionId: string | undefined, newState: string | undefined): Uint8Array {
  const state = newState ?? 'RUNNING';
  return encodeEvent('task_session.state_changed', {
    task_id: taskId,
    session_id: sessionId,
    old_state: state === 'RUNNING' ? 'IDLE' : 'RUNNING',
    new_state: state,
  });
}

/**
 * A fresh topology under a random prefix (`<name><random>_<dialect>.`), removed at the end of the
 * run; the randomness is what lets the removal match every stream carrying the prefix.
 */
export function benchTopology(nc: NatsConnection, name: string, dialect: DialectName): { prefix: string; topology: Topology; remove: () => Promise<void> } {
  const prefix = `${name}${randomUUID().replaceAll('-', '').slice(0, 8)}_${dialect}.`;
  const topology = topologyFor(prefix);
  return { prefix, topology, remove: onCleanup(() => deleteTopology(nc, topology)) };
}

/** The worker's settings in every bench; each bench overrides what it measures. */
export function benchWorkerConfig(prefix: string, overrides: Partial<WorkerConfig> = {}): WorkerConfig {
  return {
    subjectPrefix: prefix,
    healthPort: 0,
    projectionBatchSize: 16,
    projectionTransactions: SETTINGS.projectionTransactions.default,
    // The default: it takes the largest request, a prompt at PLAN_COMMENT_LIMITS.promptMaxBytes.
    maxEventBytes: SETTINGS.maxEventBytes.default,
    maxDeliver: 10,
    ackWaitMs: 30_000,
    streamMaxAgeMs: 3_600_000,
    reconcilePageSize: 500,
    bootReconcile: false,
    respondDeadlineMs: 30_000,
    ...overrides,
  };
}

/** `count` bus round trips, one at a time: a request carrying `body` to an echo responder on the same server. */
export async function busRoundTrips(nc: NatsConnection, prefix: string, body: string, count: number): Promise<Timed> {
  const subject = `${prefix}bench.echo`;
  const echo = nc.subscribe(subject, { callback: (_err, m) => void m.respond(m.data) });
  try {
    return await timeEach(Array.from({ length: count }), async () => void (await nc.request(subject, body, { timeout: 5000 })));
  } finally {
    echo.unsubscribe();
  }
}

/**
 * Deletes every stream (and so every consumer) and KV bucket derived from the topology: the ones
 * named in it, and any other stream carrying its prefix token (the worker may grow new ones).
 */
export async function deleteTopology(nc: NatsConnection, topology: Topology): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const upper = topology.eventsStream.slice(0, topology.eventsStream.indexOf('PENDING_PROJECTOR_'));
  const lower = topology.summaryBucket.slice(0, topology.summaryBucket.indexOf('pending_projector_'));
  const names = new Set(topologyStreams(topology));
  if (upper && lower) {
    for await (const name of jsm.streams.names()) if (name.startsWith(upper) || name.startsWith(`KV_${lower}`)) names.add(name);
  }
  for (const stream of names) await jsm.streams.delete(stream).catch(() => undefined);
}

/** Stream sequence of the newest event stored so far (0 when none). */
export async function lastEventSeq(jsm: JetStreamManager, topology: Topology): Promise<number> {
  return (await jsm.streams.info(topology.eventsStream)).state.last_seq;
}

export class ConsumerStalledError extends Error {
  override name = 'ConsumerStalledError';
}

/**
 * Polls `probe` every `pollMs` until it reports done, resolving with performance.now() at that
 * poll; fails when its progress figure has not moved for `stallMs` (a lost core publish or a stuck
 * worker), since waiting longer would only hide it.
 */
export async function waitProgress(probe: () => Promise<{ done: boolean; progress: number; state: string }>, pollMs: number, stallMs: number): Promise<number> {
  let last = Number.NaN;
  let movedAt = performance.now();
  for (;;) {
    const p = await probe();
    const now = performance.now();
    if (p.done) return now;
    if (p.progress !== last) [last, movedAt] = [p.progress, now];
    else if (now - movedAt > stallMs) throw new ConsumerStalledError(`no progress for ${stallMs} ms: ${p.state}`);
    await sleep(pollMs);
  }
}

/** Until the worker's durable consumer has every event up to `targetSeq` acknowledged and nothing pending or unacknowledged. */
export function waitAcked(jsm: JetStreamManager, topology: Topology, targetSeq: number, pollMs: number, stallMs: number): Promise<number> {
  return waitProgress(
    async () => {
      const info = await jsm.consumers.info(topology.eventsStream, topology.consumer);
      const floor = info.ack_floor.stream_seq;
      const state = `consumer ack floor ${floor} of ${targetSeq}, ${info.num_pending} pending, ${info.num_ack_pending} unacknowledged`;
      return { done: floor >= targetSeq && info.num_pending === 0 && info.num_ack_pending === 0, progress: floor, state };
    },
    pollMs,
    stallMs,
  );
}

/**
 * Watches `<prefix>task.status_summary.updated` like a UI client and hands each summary's task id
 * and arrival instant to the current listener. Reads the task id from the publisher's header, so
 * watching costs no JSON parse on the shared event loop.
 */
export class SummaryWatcher {
  private readonly sub: Subscription;
  private listener: ((taskId: string, at: number, payload: Uint8Array) => void) | undefined;
  received = 0;

  constructor(nc: NatsConnection, topology: Topology) {
    const sub = (this.sub = nc.subscribe(topology.summarySubject));
    void (async () => {
      for await (const m of sub) {
        const at = performance.now();
        this.received++;
        const taskId = m.headers?.get('Pending-Projector-Task-Id');
        if (taskId && this.listener) this.listener(taskId, at, m.data);
      }
    })();
  }

  /** `payload` is the summary envelope, undecoded: a listener that needs it pays for the parse. */
  listen(listener: ((taskId: string, at: number, payload: Uint8Array) => void) | undefined): void {
    this.listener = listener;
  }

  /** Resolves once `count` summaries arrived since `from` (a `received` snapshot), or false after `timeoutMs`. */
  async waitReceived(from: number, count: number, timeoutMs = 10_000): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (this.received - from < count) {
      if (performance.now() > deadline) return false;
      await sleep(5);
    }
    return true;
  }

  stop(): void {
    this.sub.unsubscribe();
  }
}
