/**
 * The reply envelope every endpoint answers with. Dependency-free: the light client package ships
 * it, so nothing here may import the NATS transport, the logger or zod.
 */

/** Stable error codes of every request/reply endpoint. */
export const REPLY_ERROR_CODES = ['bad_request', 'not_found', 'conflict', 'retryable', 'unavailable', 'internal'] as const;
export type ReplyErrorCode = (typeof REPLY_ERROR_CODES)[number];

export type ReplyFailure = { ok: false; error: { code: ReplyErrorCode; message: string } };
export type Reply<T extends object> = ({ ok: true } & T) | ReplyFailure;

/** Any endpoint's reply; a failure may carry extra top-level fields (the guard's `blocked: true`). */
export type AnyReply = { ok: true } | ReplyFailure;
