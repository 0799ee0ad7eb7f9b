import { z } from 'zod';
import type { ReplyFailure } from './replyErrorCodes.js';
import { describeRequestIssues } from './describeRequestIssues.js';

export type ParsedRequest<T> = { ok: true; request: T } | { ok: false; reply: ReplyFailure };

const utf8 = new TextDecoder('utf-8', { fatal: true });

const badRequest = (message: string): { ok: false; reply: ReplyFailure } => ({ ok: false, reply: { ok: false, error: { code: 'bad_request', message } } });

/**
 * A request body as bytes off the bus, to the request `schema` describes or the `bad_request` reply
 * that says why not: too large, not UTF-8 (refused, not repaired), not JSON, or not what the schema takes. It never throws,
 * so whatever a caller sends, the endpoint replies with a typed error and no handler runs. An
 * empty body is `{}`, for endpoints whose fields are all optional.
 */
export function parseRequest<S extends z.ZodType>(bytes: Uint8Array, schema: S, maxBytes: number): ParsedRequest<z.output<S>> {
  if (bytes.byteLength > maxBytes) return badRequest(`request of ${bytes.byteLength} bytes exceeds ${maxBytes}`);
  let text: string;
  try {
    // Fatal, as for events: a lenient decoder turns each bad byte into U+FFFD, and the request would
    // go on to name ids and write text the caller never sent.
    text = utf8.decode(bytes);
  } catch {
    return badRequest('request body is not UTF-8');
  }
  let body: unknown;
  try {
    body = text === '' ? {} : JSON.parse(text);
  } catch (err) {
    return badRequest(`invalid JSON: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) return badRequest(describeRequestIssues(parsed.error));
  return { ok: true, request: parsed.data };
}
