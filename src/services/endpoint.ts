import { errors, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { z } from 'zod';

/** Stable error codes of every request/reply endpoint. */
export const REPLY_ERROR_CODES = ['bad_request', 'not_found', 'conflict', 'retryable', 'unavailable', 'internal'] as const;
export type ReplyErrorCode = (typeof REPLY_ERROR_CODES)[number];

export type ReplyFailure = { ok: false; error: { code: ReplyErrorCode; message: string } };
export type Reply<T extends object> = ({ ok: true } & T) | ReplyFailure;

/** Any endpoint's reply; a failure may carry extra top-level fields (the guard's `blocked: true`). */
export type AnyReply = { ok: true } | ReplyFailure;

export interface EndpointOptions<S extends z.ZodType> {
  nc: NatsConnection;
  subject: string;
  schema: S;
  /** Returns the reply value, sent as it is. A rejection is a crash: logged, and replied `internal`. */
  handler: (request: z.output<S>) => Promise<AnyReply>;
  logger: Logger;
  maxRequestBytes: number;
}

const QUEUE_GROUP = 'pending-projector';
const encoder = new TextEncoder();

/**
 * A request/reply endpoint on a plain subscription in a queue group (every replica serves it; one
 * answers each request). Bodies are JSON validated by zod; every reply is `{ok: true, ...}` or
 * `{ok: false, error: {code, message}}`: the handler's reply value, or a `bad_request` for a body
 * that never reached it. A handler crash becomes `internal` and the endpoint stays up.
 */
export function serveEndpoint<S extends z.ZodType>(options: EndpointOptions<S>): { stop(): Promise<void>; done: Promise<void>; failure(): unknown } {
  const log = options.logger.child({ component: 'endpoint', subject: options.subject });
  const sub: Subscription = options.nc.subscribe(options.subject, { queue: QUEUE_GROUP });
  const inFlight = new Set<Promise<void>>();
  const respond = (msg: { respond(data: Uint8Array): boolean }, reply: AnyReply) =>
    msg.respond(encoder.encode(JSON.stringify(reply)));
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
      const work = (async () => {
        if (msg.data.byteLength > options.maxRequestBytes) {
          respond(msg, { ok: false, error: { code: 'bad_request', message: `request of ${msg.data.byteLength} bytes exceeds ${options.maxRequestBytes}` } });
          return;
        }
        let body: unknown;
        try {
          body = msg.data.byteLength === 0 ? {} : JSON.parse(new TextDecoder().decode(msg.data));
        } catch (err) {
          respond(msg, { ok: false, error: { code: 'bad_request', message: `invalid JSON: ${(err as Error).message}` } });
          return;
        }
        const parsed = options.schema.safeParse(body);
        if (!parsed.success) {
          respond(msg, { ok: false, error: { code: 'bad_request', message: z.prettifyError(parsed.error) } });
          return;
        }
        let reply: AnyReply;
        try {
          reply = await options.handler(parsed.data);
        } catch (err) {
          log.error({ err }, 'endpoint handler failed');
          reply = { ok: false, error: { code: 'internal', message: (err as Error).message ?? 'internal error' } };
        }
        respond(msg, reply);
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
