import type { RepositoryContext } from '../../src/repository/context.js';
import { withTimestampForms, type TimestampForms } from '../../src/repository/dialect.js';
import { toKandevTimestamp } from '../../src/timestamps.js';
import type { TimestampText } from './seed.js';

/**
 * The timestamp texts a test writes rows in, and the repository contexts that read them: Kandev's
 * SQLite form everywhere, or a per-value random mix of it and the canonical form in one column.
 */

/** What detection finds on a database whose rows Kandev writes. */
const KANDEV_FORMS: TimestampForms = { mixed: true, writes: 'kandev' };

export type TextPlan = 'kandev' | 'mixed';
export const TEXT_PLANS: readonly TextPlan[] = ['kandev', 'mixed'];

/** mulberry32: a small seeded generator, so a failing mix can be replayed from its seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let r = state;
    r = Math.imul(r ^ (r >>> 15), r | 1);
    r ^= r + Math.imul(r ^ (r >>> 7), r | 61);
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every value in Kandev's form, or each value in either form at random (from `seed`). */
export function textsFor(plan: TextPlan, seed = 1): TimestampText {
  if (plan === 'kandev') return (canonical) => toKandevTimestamp(canonical);
  const random = seededRandom(seed);
  return (canonical) => (random() < 0.5 ? toKandevTimestamp(canonical) : canonical);
}

/** The same database as `ctx`, read and written as detection would on a database holding Kandev's rows. */
export function kandevContext(ctx: RepositoryContext, forms: TimestampForms = KANDEV_FORMS): RepositoryContext {
  return { ...ctx, dialect: withTimestampForms(ctx.dialect, forms) };
}
