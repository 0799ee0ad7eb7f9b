import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getActiveTurn, getCurrentTurn } from '../../src/repository/turns/turns.js';
import { newestDurableTurnId } from '../../src/turns/index.js';
import { loadCurrentTurnFixture, type CurrentTurnFixtureCase } from '../support/currentTurnFixture.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedSession, seedTurnAt, type TimestampText } from '../support/seed.js';
import { kandevContext, TEXT_PLANS, textsFor } from '../support/timestampTexts.js';

// Loaded at collection time: a missing or invalid file fails this file instead of running zero cases.
const cases = loadCurrentTurnFixture();

/** Seeds one fixture case into a fresh task and session; turn ids are the fixture's own. */
async function seedCase(
  ctx: RepositoryContext,
  fixtureCase: CurrentTurnFixtureCase,
  text?: TimestampText,
): Promise<{ sessionId: string; ids: Map<string, string> }> {
  const { sessionId } = await seedSession(ctx);
  // Turn ids are primary keys across the whole table, so each case's ids get a per-session prefix;
  // the prefix is shared within the case, so it never changes the id order being tested.
  const prefix = `${sessionId}:`;
  const ids = new Map<string, string>();
  for (const row of fixtureCase.rows) {
    const id = await seedTurnAt(
      ctx,
      sessionId,
      {
        id: prefix + row.id,
        startedAt: row.started_at,
        createdAt: row.created_at,
        completedAt: row.completed_at,
        metadata: row.metadata,
      },
      text,
    );
    ids.set(id, row.id);
  }
  return { sessionId, ids };
}

describeEachDialect('the shared current-turn fixture on %s (spec AC-10, D9)', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, fixtureCase) => {
    await expectFixtureCase(t.ctx, fixtureCase);
  });
});

async function expectFixtureCase(ctx: RepositoryContext, fixtureCase: CurrentTurnFixtureCase, text?: TimestampText): Promise<void> {
  const { sessionId, ids } = await seedCase(ctx, fixtureCase, text);

  const current = await getCurrentTurn(ctx, sessionId);
  expect(current === undefined ? null : ids.get(current.id)).toBe(fixtureCase.expectedCurrentTurnId);

  // D10: the active turn is the first open conversational turn under the same order.
  const openTurns = fixtureCase.turns.filter((turn) => turn.completed_at == null);
  const active = await getActiveTurn(ctx, sessionId);
  expect(active === undefined ? null : ids.get(active.id)).toBe(newestDurableTurnId(openTurns));
  if (active !== undefined) expect(active.completedAt).toBeNull();
}

// The same cases with the rows as Kandev's Go SQLite driver writes them (`2026-08-20 10:00:00.5+00:00`,
// trailing zeros trimmed), and with each timestamp of each row in either form at random: SQLite then
// orders through the normalised key, PostgreSQL parses both texts into the same instants (D9).
for (const plan of TEXT_PLANS) {
  describeEachDialect(
    `the shared current-turn fixture on %s, timestamps written ${plan === 'kandev' ? "in Kandev's SQLite form" : 'in a per-value mix of both forms'}`,
    (dialect) => {
      let t: TestDatabase;
      beforeAll(async () => {
        t = await openTestDatabase(dialect);
      });
      afterAll(async () => {
        await t.close();
      });

      it.each(cases.map((c, index) => [c.name, c, index] as const))('%s', async (_name, fixtureCase, index) => {
        // One seed per case, so a failure names the mix it saw.
        await expectFixtureCase(kandevContext(t.ctx), fixtureCase, textsFor(plan, 1000 + index));
      });
    },
  );
}
