/**
 * NATS side of the worker benchmark: a Kandev-like event publisher, a client that watches the
 * summary subject, and the consumer-progress probe every throughput figure ends on.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { topologyStreams, type Topology } from '../src/contract/subjects.js';

const encoder = new TextEncoder();

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A Kandev bus envelope, encoded. */
export function encodeEvent(type: string, data: Record<string, unknown>): Uint8Array {
  return encoder.encode(JSON.stringify({ id: randomUUID(), type, subject: type, source: 'bench', timestamp: new Date().toISOString(), data }));
}

/**
 * Deletes every stream (and so every consumer) and KV bucket derived from the topology: the ones
 * named in it, and any other stream carrying its prefix token (the worker may grow new ones). The
 * benchmark's prefix is random, so the prefix match touches nothing else.
 */
export async function deleteTopology(nc: NatsConnection, topology: Topology): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const upper = topology.eventsStream.slice(0, topology.eventsStream.indexOf('PENDING_PROJECTOR_'));
  const lower = topology.summaryBucket.slice(0, topology.summaryBucket.indexOf('pending_projector_'));
  const names = new Set(topologyStreams(topology));
  if (upper && lower) {
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(upper) || name.startsWith(`KV_${lower}`)) names.add(name);
    }
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

export interface AckProgress {
  ackFloor: number;
  numPending: number;
  numAckPending: number;
}

export async function ackProgress(jsm: JetStreamManager, topology: Topology): Promise<AckProgress> {
  const info = await jsm.consumers.info(topology.eventsStream, topology.consumer);
  return { ackFloor: info.ack_floor.stream_seq, numPending: info.num_pending, numAckPending: info.num_ack_pending };
}

/**
 * Resolves with performance.now() at the first poll that sees the worker's durable consumer with
 * every event up to `targetSeq` acknowledged and nothing pending or unacknowledged. Fails when the
 * ack floor does not move for `stallMs` (a lost core publish or a stuck worker).
 */
export async function waitAcked(jsm: JetStreamManager, topology: Topology, targetSeq: number, options: { pollMs?: number; stallMs?: number } = {}): Promise<number> {
  const pollMs = options.pollMs ?? 10;
  const stallMs = options.stallMs ?? 60_000;
  let floor = -1;
  let movedAt = performance.now();
  for (;;) {
    const p = await ackProgress(jsm, topology);
    const now = performance.now();
    if (p.ackFloor >= targetSeq && p.numPending === 0 && p.numAckPending === 0) return now;
    if (p.ackFloor !== floor) {
      floor = p.ackFloor;
      movedAt = now;
    } else if (now - movedAt > stallMs) {
      throw new ConsumerStalledError(
        `consumer made no progress for ${stallMs} ms: ack floor ${p.ackFloor} of ${targetSeq}, ${p.numPending} pending, ${p.numAckPending} unacknowledged`,
      );
    }
    await sleep(pollMs);
  }
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
    const sub = nc.subscribe(topology.summarySubject);
    this.sub = sub;
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
