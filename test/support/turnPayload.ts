import { z } from 'zod';

/**
 * An RFC 3339 UTC instant (`Z` only) with at most nine fractional digits. UI clients order turns
 * by padding the fraction to nine digits (src/turns/newestDurableTurnId.ts), so an offset or a
 * finer fraction would compare as plain text and could misorder turns; rejecting it here keeps the
 * comparison sound for every payload that passes.
 */
const utcInstantSchema = z.iso
  .datetime({ message: 'expected an RFC 3339 UTC timestamp ending in Z' })
  .refine((value) => !/\.\d{10,}Z$/.test(value), { message: 'expected at most nine fractional digits' });

/**
 * One turn record as UI clients receive it from the turns listing: the input of
 * `newestDurableTurnId`. An open turn carries `completed_at` absent or null; `metadata` carries
 * `lifecycle_only` on a lifecycle turn and is read only through the four-value marker test.
 * Unknown keys are stripped, so the server may add fields without breaking older clients.
 */
export const durableTurnSchema = z.object({
  id: z.string().min(1),
  started_at: utcInstantSchema,
  created_at: utcInstantSchema,
  completed_at: utcInstantSchema.nullable().optional(),
  metadata: z.record(z.string(), z.unknown()).nullable().optional(),
});
