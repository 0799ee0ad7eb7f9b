import { errors, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { parseRequest } from '../contract/parseRequest.js';
import type { AnyReply, ReplyErrorCode, ReplyFailure } from '../contract/replyErrorCodes.js';
import { classifyFailure } from '../errors.js';

/** What a reply says, as the metrics count it: `ok`, or its error code. */
export type ReplyCode = 'ok' | ReplyErrorCode;

export interface EndpointOptions<S extends z.ZodType> {
  nc: NatsConnection;
  subject: string;
  schema: S;
  /** Returns the reply value, sent as it is. A rejection is logged and replied by thrownFailureReply. */
  handler: (request: z.output<S>) => Promise<AnyReply>;
  logger: Logger;
  maxRequestBytes: number;
  /** Told of every reply sent: its code and the seconds since the request arrived (the metrics). */
  observe?: (code: ReplyCode, seconds: number) => void;
  /**
   * Fields every failure reply of this endpoint carries, whichever step failed: a body refused
   * before the handler, a handler crash, a reply that could not be sent, or the handler's own
   * failure. The guard's `{blocked: true, live: true}`: a caller that reads only `blocked` must
   * never read a failure as "not blocked".
   */
  failureFields?: Record<string, unknown>;
  /**
   * The queue group the replicas share, so one of them answers each request (the default); `null`
   * for an endpoint every replica answers for itself (`replica.stats`).
   */
  queue?: string | null;
}

const QUEUE_GROUP = 'pending-projector';
const encoder = new TextEncoder();

/**
 * The one reply policy for a handler that threw (a database or bus failure the handler did not
 * turn into a value): `unavailable` when classifyFailure calls it transient (a retry of the same
 * request can succeed), `internal` otherwise. Handlers never decide this themselves, so the same
 * outage gets the same answer from every endpoint.
 */
function thrownFailureReply(err: unknown): ReplyFailure {
  const message = (err as Error | undefined)?.message || 'internal error';
  return { ok: false, error: { code: classifyFailure(err) === 'transient' ? 'unavailable' : 'internal', message } };
}

/**
 * A request/reply endpoint on a plain subscription in a queue group (every replica serves it; one
 * answers each request), or, with `queue: null`, outside it (every replica answers each request). Bodies are JSON validated by zod; every reply is `{ok: true, ...}` or
 * `{ok: false, error: {code, message}}`: the handler's reply value, or a `bad_request` for a body
 * that never reached it (parseRequest). A handler that throws is answered by thrownFailureReply, and
 * the endpoint stays up.
 */
export function serveEndpoint<S extends z.ZodType>(options: EndpointOptions<S>): { stop(): Promise<void>; done: Promise<void>; failure(): unknown } {
  const log = options.logger.child({ component: 'endpoint', subject: options.subject });
  const queue = options.queue === undefined ? QUEUE_GROUP : options.queue;
  const sub: Subscription = options.nc.subscribe(options.subject, queue === null ? {} : { queue });
  const inFlight = new Set<Promise<void>>();
  // A reply the connection will not send (over the server's max_payload, or the connection
  // closed) throws; unhandled, that rejection would end the worker. The caller gets `internal`
  // instead, if even that can be sent.
  const failureFields = options.failureFields ?? {};
  const withFailureFields = (reply: AnyReply): AnyReply => (reply.ok ? reply : { ...failureFields, ...reply });
  const respond = (msg: { respond(data: Uint8Array): boolean }, reply: AnyReply, startedAt: bigint) => {
    let code: ReplyCode = reply.ok ? 'ok' : reply.error.code;
    try {
      msg.respond(encoder.encode(JSON.stringify(withFailureFields(reply))));
    } catch (err) {
      code = 'internal';
      log.error({ err }, 'endpoint reply could not be sent');
      try {
        msg.respond(
          encoder.encode(
            JSON.stringify(withFailureFields({ ok: false, error: { code: 'internal', message: `the reply could not be sent: ${(err as Error).message}` } })),
          ),
        );
      } catch {
        // The connection is gone: the caller's request times out, which it handles as unavailable.
      }
    }
    options.observe?.(code, Number(process.hrtime.bigint() - startedAt) / 1e9);
  };
  let failure: unknown;
  const done = (async () => {
    try {
      await serve();
    } catch (err) {
      // A refused subscription (a permission) is the start's to report, with every other one
      // (startServiceEndpoints); anything else ended this endpoint while the worker runs.
      failure = err;
      if (!(err instanceof errors.PermissionViolationError)) log.error({ err }, 'endpoint stopped serving');
    }
  })();
  async function serve(): Promise<void> {
    for await (const msg of sub) {
      const startedAt = process.hrtime.bigint();
      const work = (async () => {
        const parsed = parseRequest(msg.data, options.schema, options.maxRequestBytes);
        if (!parsed.ok) {
          respond(msg, parsed.reply, startedAt);
          return;
        }
        let reply: AnyReply;
        try {
          reply = await options.handler(parsed.request);
        } catch (err) {
          log.error({ err }, 'endpoint handler failed');
          reply = thrownFailureReply(err);
        }
        respond(msg, reply, startedAt);
      })();
      inFlight.add(work);
      void work.finally(() => inFlight.delete(work));
    }
  }
  return {
    done,
    failure: () => failure,
    async stop() {
      await sub.drain().catch(() => undefined);
      await done;
      await Promise.allSettled([...inFlight]);
    },
  };
}
