import { z } from 'zod';
import { idSchema, INVALID_ID_ISSUE, MAX_ID_LENGTH } from '../storableText.js';

/** Kandev's bus envelope. `data` carries the event fields; the worker reads only the ids below. */
const envelopeSchema = z.object({
  // The event's own id never reaches SQL, so it keeps only the length bound.
  id: z.string().min(1).max(MAX_ID_LENGTH),
  type: z.string().min(1).max(256),
  subject: z.string().max(512).optional(),
  source: z.string().max(256).optional(),
  timestamp: z.string().max(64).optional(),
  data: z.record(z.string(), z.unknown()),
});
export type Envelope = z.infer<typeof envelopeSchema>;

const optionalId = idSchema.optional();

/**
 * The fields of `data` the projector relies on; anything else is Kandev's and passes through. The
 * ids are looked up in SQL, so an id either dialect cannot store is refused here (`invalid_id`).
 */
const eventDataSchema = z
  .object({
    task_id: optionalId,
    session_id: optionalId,
    type: z.string().max(64).optional(),
    requests_input: z.union([z.boolean(), z.number()]).optional(),
  })
  .loose();
export type EventData = z.infer<typeof eventDataSchema>;

export type ParsedEvent =
  | { ok: true; envelope: Envelope; data: EventData }
  | { ok: false; reason: EventRejection; detail: string };

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

/** A new envelope for something this service publishes. */
export function createEnvelope(type: string, subject: string, data: Record<string, unknown>, id: string, timestamp: string): Envelope {
  return { id, type, subject, source: 'pending-projector', timestamp, data };
}
