import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { z } from 'zod';

/** Stable error codes of every request/reply endpoint. */
export const REPLY_ERROR_CODES = ['bad_request', 'not_found', 'conflict', 'retryable', 'unavailable', 'internal'] as const;
export type ReplyErrorCode = (typeof REPLY_ERROR_CODES)[number];

export type Reply<T extends object> = ({ ok: true } & T) | { ok: false; error: { code: ReplyErrorCode; message: string } };

/**
 * An expected failure a handler returns as a reply (not a crash). `details` are extra top-level
 * reply fields beside `ok` and `error` (e.g. the guard's fail-closed `blocked: true`).
 */
export class ReplyError extends Error {
  override name = 'ReplyError';
  constructor(
    readonly code: ReplyErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export interface EndpointOptions<S extends z.ZodType, R extends object> {
  nc: NatsConnection;
  subject: string;
  schema: S;
  handler: (request: z.output<S>) => Promise<R>;
  logger: Logger;
  maxRequestBytes: number;
}

const QUEUE_GROUP = 'pending-projector';
const encoder = new TextEncoder();

/**
 * A request/reply endpoint on a plain subscription in a queue group (every replica serves it; one
 * answers each request). Bodies are JSON validated by zod; every reply is `{ok: true, ...}` or
 * `{ok: false, error: {code, message}}`. A handler crash becomes `internal` and the endpoint stays up.
 */
export function serveEndpoint<S extends z.ZodType, R extends object>(options: EndpointOptions<S, R>): { stop(): Promise<void>; done: Promise<void> } {
  const log = options.logger.child({ component: 'endpoint', subject: options.subject });
  const sub: Subscription = options.nc.subscribe(options.subject, { queue: QUEUE_GROUP });
  const inFlight = new Set<Promise<void>>();
  const respond = (msg: { respond(data: Uint8Array): boolean }, reply: Reply<R> | (Record<string, unknown> & { ok: false })) =>
    msg.respond(encoder.encode(JSON.stringify(reply)));
  const done = (async () => {
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
        try {
          respond(msg, { ok: true, ...(await options.handler(parsed.data)) });
        } catch (err) {
          if (err instanceof ReplyError) {
            respond(msg, { ...err.details, ok: false, error: { code: err.code, message: err.message } });
            return;
          }
          log.error({ err }, 'endpoint handler failed');
          respond(msg, { ok: false, error: { code: 'internal', message: (err as Error).message ?? 'internal error' } });
        }
      })();
      inFlight.add(work);
      void work.finally(() => inFlight.delete(work));
    }
  })();
  return {
    done,
    async stop() {
      await sub.drain().catch(() => undefined);
      await done;
      await Promise.allSettled([...inFlight]);
    },
  };
}
