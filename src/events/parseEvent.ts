import { z } from 'zod';
import { envelopeSchema, eventDataSchema, type Envelope, type EventData } from '../contract/envelope.js';
import { INVALID_ID_ISSUE } from '../storableText.js';

export type ParsedEvent = { ok: true; envelope: Envelope; data: EventData } | { ok: false; reason: EventRejection; detail: string };

/** Why an event can never be projected: the reason its dead-letter record carries. */
export type EventRejection = 'too_large' | 'invalid_json' | 'invalid_envelope' | 'invalid_id';

const isIdIssue = (issue: z.core.$ZodIssue) => issue.code === 'custom' && issue.params?.[INVALID_ID_ISSUE] === true;

/**
 * Size check, UTF-8 decoding, JSON parse and schema validation, with a reason a dead-letter record
 * can carry. Every rejection is final: no later delivery of the same bytes can pass.
 */
export function parseEvent(bytes: Uint8Array, maxBytes: number): ParsedEvent {
  if (bytes.byteLength > maxBytes) {
    return { ok: false, reason: 'too_large', detail: `${bytes.byteLength} bytes exceeds the ${maxBytes}-byte limit` };
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (err) {
    return { ok: false, reason: 'invalid_json', detail: (err as Error).message };
  }
  const envelope = envelopeSchema.safeParse(json);
  if (!envelope.success) return { ok: false, reason: 'invalid_envelope', detail: z.prettifyError(envelope.error) };
  const data = eventDataSchema.safeParse(envelope.data.data);
  if (!data.success) {
    const reason = data.error.issues.every(isIdIssue) ? 'invalid_id' : 'invalid_envelope';
    return { ok: false, reason, detail: z.prettifyError(data.error) };
  }
  return { ok: true, envelope: envelope.data, data: data.data };
}
