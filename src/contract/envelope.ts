import { z } from 'zod';
import { idSchema, MAX_ID_LENGTH } from '../storableText.js';

/** Kandev's bus envelope. `data` carries the event fields; the worker reads only the ids below. */
export const envelopeSchema = z.object({
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
export const eventDataSchema = z
  .object({
    task_id: optionalId,
    session_id: optionalId,
    type: z.string().max(64).optional(),
    requests_input: z.union([z.boolean(), z.number()]).optional(),
  })
  .loose();
export type EventData = z.infer<typeof eventDataSchema>;

/** A new envelope for something this service publishes. */
export function createEnvelope(type: string, subject: string, data: Record<string, unknown>, id: string, timestamp: string): Envelope {
  return { id, type, subject, source: 'pending-projector', timestamp, data };
}
