/**
 * `bench:queries --timestamps kandev[-indexed]`: the seeded SQLite rows rewritten in Kandev's text
 * form, read through the normalised key as detection would on such a database, optionally with the
 * key-expression index docs/schema.md ("Timestamp forms") reports for Kandev-owned SQLite schemas.
 */
import type { RepositoryContext } from '../../src/repository/context.js';
import { withTimestampForms } from '../../src/repository/dialect.js';

export const BENCH_TIMESTAMP_FORMS = ['canonical', 'kandev', 'kandev-indexed'] as const;
export type BenchTimestampForms = (typeof BENCH_TIMESTAMP_FORMS)[number];

// Canonical text (six significant fractional digits, then '000Z') as Kandev's driver writes it.
const kandevText = (c: string) =>
  `substr(${c}, 1, 10) || ' ' || substr(${c}, 12, 8) || ` +
  `CASE WHEN rtrim(substr(${c}, 21, 9), '0') = '' THEN '' ELSE '.' || rtrim(substr(${c}, 21, 9), '0') END || '+00:00'`;

const KEY_INDEX_KEY = (c: string) =>
  `(substr(${c}, 1, 10) || 'T' || substr(${c}, 12, 8) || '.' || substr(rtrim(substr(${c}, 21), 'Z+-:0') || '000000', 1, 6) || '000Z')`;

/** Rewrites every turn and message timestamp (SQLite only), then returns the context that reads them. */
export async function toKandevTimestamps(ctx: RepositoryContext, forms: BenchTimestampForms): Promise<RepositoryContext> {
  if (forms === 'canonical' || ctx.dialect.name !== 'sqlite') return ctx;
  await ctx.knex.raw(
    `UPDATE task_session_turns SET started_at = ${kandevText('started_at')}, created_at = ${kandevText('created_at')},
       updated_at = ${kandevText('updated_at')}, completed_at = CASE WHEN completed_at IS NULL THEN NULL ELSE ${kandevText('completed_at')} END`,
  );
  await ctx.knex.raw(`UPDATE task_session_messages SET created_at = ${kandevText('created_at')}, updated_at = ${kandevText('updated_at')}`);
  if (forms === 'kandev-indexed') {
    await ctx.knex.raw(
      `CREATE INDEX pp_turns_current_turn_order_key ON task_session_turns (task_session_id, (CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END),
         ${KEY_INDEX_KEY('started_at')} DESC, ${KEY_INDEX_KEY('created_at')} DESC, id DESC)`,
    );
  }
  await ctx.knex.raw('ANALYZE');
  return { ...ctx, dialect: withTimestampForms(ctx.dialect, { mixed: true, writes: 'kandev' }) };
}
