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

/**
 * Inserts a turn row exactly as given (explicit instants, raw metadata text allowed), the way a
 * fixture or a legacy row from another producer looks. Production code writes turns through
 * src/repository/turns.ts.
 */
export async function seedTurnAt(ctx: RepositoryContext, sessionId: string, turn: SeedTurn): Promise<string> {
  const session = await ctx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
  const id = turn.id ?? randomUUID();
  const startedAt = toCanonicalTimestamp(turn.startedAt);
  await ctx.knex('task_session_turns').insert({
    id,
    task_session_id: sessionId,
    task_id: session.task_id,
    started_at: startedAt,
    created_at: toCanonicalTimestamp(turn.createdAt ?? turn.startedAt),
    completed_at: turn.completedAt ? toCanonicalTimestamp(turn.completedAt) : null,
    metadata: typeof turn.metadata === 'string' || turn.metadata === null ? turn.metadata : JSON.stringify(turn.metadata ?? {}),
    updated_at: startedAt,
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
