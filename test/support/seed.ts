import { randomUUID } from 'node:crypto';
import { seedClarificationBundle, seedSession, type SeededSession } from '../../bench/seed/fixtures.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';

// The rows Kandev writes come from the seeder the benchmarks share; legacy rows written exactly as
// given (seedTurnAt) are the tests' own.
export { seedClarificationBundle, seedSession, type SeedBundleOptions, type SeededSession } from '../../bench/seed/fixtures.js';

export interface SeedTurn {
  id?: string;
  startedAt: string;
  createdAt?: string;
  completedAt?: string | null;
  metadata?: Record<string, unknown> | string | null;
}

/** The text a seeded timestamp is stored as, given its canonical instant and the column it goes to. */
export type TimestampText = (canonical: string, column: string) => string;

/**
 * Inserts a turn row exactly as given (explicit instants, raw metadata text allowed), the way a
 * fixture or a legacy row from another producer looks. Production code writes turns through
 * src/repository/turns/turns.ts. `text` picks each timestamp's stored text (canonical unless told, e.g.
 * Kandev's SQLite form or a per-value mix).
 */
export async function seedTurnAt(ctx: RepositoryContext, sessionId: string, turn: SeedTurn, text: TimestampText = (canonical) => canonical): Promise<string> {
  const session = await ctx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
  const id = turn.id ?? randomUUID();
  const startedAt = toCanonicalTimestamp(turn.startedAt);
  await ctx.knex('task_session_turns').insert({
    id,
    task_session_id: sessionId,
    task_id: session.task_id,
    started_at: text(startedAt, 'started_at'),
    created_at: text(toCanonicalTimestamp(turn.createdAt ?? turn.startedAt), 'created_at'),
    completed_at: turn.completedAt ? text(toCanonicalTimestamp(turn.completedAt), 'completed_at') : null,
    metadata: typeof turn.metadata === 'string' || turn.metadata === null ? turn.metadata : JSON.stringify(turn.metadata ?? {}),
    updated_at: text(startedAt, 'updated_at'),
  });
  return id;
}

/** A RUNNING task whose open turn asks one pending question: its pending action is 'clarification'. */
export async function seedTaskWithQuestion(ctx: RepositoryContext): Promise<SeededSession> {
  const seeded = await seedSession(ctx);
  const turnId = await seedTurnAt(ctx, seeded.sessionId, { startedAt: new Date().toISOString() });
  await seedClarificationBundle(ctx, { sessionId: seeded.sessionId, turnId });
  return seeded;
}
