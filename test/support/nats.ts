import { randomUUID } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { inject } from 'vitest';
import { topologyFor, topologyStreams } from '../../src/contract/subjects.js';

export function natsAvailable(): boolean {
  return Boolean(inject('natsUrl'));
}

export function natsUrl(): string {
  const url = inject('natsUrl');
  if (!url) throw new Error('NATS is not available');
  return url;
}

/** A unique subject prefix, so test files never see each other's streams, consumers or buckets. */
export function uniquePrefix(label: string): string {
  return `t${randomUUID().replaceAll('-', '').slice(0, 10)}_${label}.`;
}

export async function connectTestNats(): Promise<NatsConnection> {
  return connect({ servers: natsUrl(), name: 'pending-projector-tests' });
}

/** Deletes every stream and bucket derived from `prefix`. */
export async function deleteTopology(nc: NatsConnection, prefix: string): Promise<void> {
  const t = topologyFor(prefix);
  const jsm = await jetstreamManager(nc);
  for (const stream of topologyStreams(t)) {
    await jsm.streams.delete(stream).catch(() => undefined);
  }
}

export function envelope(type: string, data: Record<string, unknown>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ id: randomUUID(), type, subject: type, source: 'test', timestamp: new Date().toISOString(), data }));
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
