import { z } from 'zod';

/** Kandev's bus envelope. `data` carries the event fields; the worker reads only the ids below. */
export const envelopeSchema = z.object({
  id: z.string().min(1).max(256),
  type: z.string().min(1).max(256),
  subject: z.string().max(512).optional(),
  source: z.string().max(256).optional(),
  timestamp: z.string().max(64).optional(),
  data: z.record(z.string(), z.unknown()),
});
export type Envelope = z.infer<typeof envelopeSchema>;

const optionalId = z.string().min(1).max(256).optional();

/** The fields of `data` the projector relies on; anything else is Kandev's and passes through. */
export const eventDataSchema = z
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
  | { ok: false; reason: 'too_large' | 'invalid_json' | 'invalid_envelope'; detail: string };

/** Size check, JSON parse and schema validation, with a reason a dead-letter record can carry. */
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
  if (!data.success) return { ok: false, reason: 'invalid_envelope', detail: z.prettifyError(data.error) };
  return { ok: true, envelope: envelope.data, data: data.data };
}

/** A new envelope for something this service publishes. */
export function createEnvelope(type: string, subject: string, data: Record<string, unknown>, id: string, timestamp: string): Envelope {
  return { id, type, subject, source: 'pending-projector', timestamp, data };
}
