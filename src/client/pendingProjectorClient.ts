import type { NatsConnection } from '@nats-io/nats-core';
import { ENDPOINT_SPECS, type EndpointMethod, type EndpointReplyOf, type EndpointRequestOf } from '../contract/endpoints.js';
import type { ReplyFailure } from '../contract/replyErrorCodes.js';
import { topologyFor } from '../contract/subjects.js';

export interface PendingProjectorClientOptions {
  /** The deployment's subject prefix (e.g. "acme."), as given to the worker. */
  prefix?: string;
  /** Reply timeout of every call but respond. Default 10 s. */
  timeoutMs?: number;
  /**
   * Reply timeout of respond, which may wait for the agent's confirmation or the resume deadline
   * and then a summary refresh. Default 65 s (twice the worker's default 30 s deadline, plus margin).
   */
  respondTimeoutMs?: number;
}

export interface CallOptions {
  timeoutMs?: number;
  /** An endpoint every replica answers (`replica.stats`): how long its replies are gathered. Default 500 ms. */
  gatherMs?: number;
}

/** One method per endpoint of ENDPOINT_TABLE: its request in, its reply out (never a rejection). */
export type EndpointMethods = { [M in EndpointMethod]: (request: EndpointRequestOf<M>, options?: CallOptions) => Promise<EndpointReplyOf<M>> };

/** A typed client for the worker's endpoints. */
export interface PendingProjectorClient extends EndpointMethods {}

const encoder = new TextEncoder();

// The caller's connection may come from another copy of @nats-io/nats-core than this module would
// import (a UI's own bundle, or a transport pinned to another version than the newest core npm
// installs for our peer range), and `instanceof` does not recognise another copy's error classes.
// The errors are recognised by their shape, which every 3.x copy shares.
const isNoResponders = (err: unknown): boolean =>
  typeof (err as { isNoResponders?: unknown } | null)?.isNoResponders === 'function' && (err as { isNoResponders(): boolean }).isNoResponders();
const isTimeout = (err: unknown): boolean => err instanceof Error && err.name === 'TimeoutError';

/**
 * Creates the client on an open connection. Transport failures become replies too: no worker
 * listening or no reply in time is `{ok: false, error: {code: 'unavailable'}}` (for respond the
 * outcome is then unknown; resending the same request is safe and returns it). An endpoint every
 * replica answers (`replica.stats`) gathers the replies for `gatherMs` and returns them together.
 */
export function createPendingProjectorClient(nc: NatsConnection, options: PendingProjectorClientOptions = {}): PendingProjectorClient {
  const topology = topologyFor(options.prefix ?? '');
  const defaultTimeoutMs = options.timeoutMs ?? 10_000;
  const call = async <T>(name: string, body: object, timeoutMs: number): Promise<T | ReplyFailure> => {
    const subject = topology.serviceSubject(name);
    try {
      const reply = await nc.request(subject, encoder.encode(JSON.stringify(body)), { timeout: timeoutMs });
      return reply.json<T>();
    } catch (err) {
      if (isNoResponders(err)) {
        return { ok: false, error: { code: 'unavailable', message: `no pending-projector worker serves ${subject}` } };
      }
      if (isTimeout(err)) {
        return { ok: false, error: { code: 'unavailable', message: `no reply on ${subject} within ${timeoutMs} ms; the outcome is unknown` } };
      }
      return { ok: false, error: { code: 'unavailable', message: (err as Error).message } };
    }
  };
  // Every replica answers; how many there are is not known here, so the replies are gathered for a
  // fixed time. A replica's failure is the reply only when no replica answered ok.
  const gather = async (name: string, body: object, gatherMs: number): Promise<{ ok: true; replicas: Array<{ replica: string }> } | ReplyFailure> => {
    const subject = topology.serviceSubject(name);
    const replicas: Array<{ replica: string }> = [];
    let failed: ReplyFailure | undefined;
    try {
      for await (const msg of await nc.requestMany(subject, encoder.encode(JSON.stringify(body)), { strategy: 'timer', maxWait: gatherMs })) {
        const reply = msg.json<{ ok: true; replicas: Array<{ replica: string }> } | ReplyFailure>();
        if (reply.ok) replicas.push(...reply.replicas);
        else failed ??= reply;
      }
    } catch (err) {
      if (replicas.length === 0 && !failed) {
        const message = isNoResponders(err) ? `no pending-projector worker serves ${subject}` : (err as Error).message;
        return { ok: false, error: { code: 'unavailable', message } };
      }
    }
    if (replicas.length > 0) return { ok: true, replicas: replicas.sort((a, b) => (a.replica < b.replica ? -1 : a.replica > b.replica ? 1 : 0)) };
    return failed ?? { ok: false, error: { code: 'unavailable', message: `no reply on ${subject} within ${gatherMs} ms` } };
  };
  // respond may wait for the agent's confirmation, so it has a timeout of its own.
  const timeoutOf = (method: EndpointMethod, o?: CallOptions) =>
    o?.timeoutMs ?? (method === 'respond' ? (options.respondTimeoutMs ?? 65_000) : defaultTimeoutMs);
  const client: Record<string, (request: object, o?: CallOptions) => Promise<unknown>> = {};
  for (const spec of ENDPOINT_SPECS) {
    const failureFields = 'failureFields' in spec ? spec.failureFields : undefined;
    if ('everyReplica' in spec && spec.everyReplica) {
      client[spec.method] = (request, o) => gather(spec.name, request, o?.gatherMs ?? 500);
      continue;
    }
    client[spec.method] = async (request, o) => {
      const reply = await call<{ ok: boolean }>(spec.name, request, timeoutOf(spec.method, o));
      // The worker adds these to each failure it sends; a transport failure gets them here.
      return reply.ok || !failureFields ? reply : { ...reply, ...failureFields };
    };
  }
  return client as unknown as PendingProjectorClient;
}
