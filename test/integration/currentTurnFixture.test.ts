import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getActiveTurn, getCurrentTurn } from '../../src/repository/turns.js';
import { newestDurableTurnId } from '../../src/turns/index.js';
import { loadCurrentTurnFixture, type CurrentTurnFixtureCase } from '../support/currentTurnFixture.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedSession, seedTurnAt } from '../support/seed.js';

// Loaded at collection time: a missing or invalid file fails this file instead of running zero cases.
const cases = loadCurrentTurnFixture();

/** Seeds one fixture case into a fresh task and session; turn ids are the fixture's own. */
async function seedCase(t: TestDatabase, fixtureCase: CurrentTurnFixtureCase): Promise<{ sessionId: string; ids: Map<string, string> }> {
  const { sessionId } = await seedSession(t.ctx);
  // Turn ids are primary keys across the whole table, so each case's ids get a per-session prefix;
  // the prefix is shared within the case, so it never changes the id order being tested.
  const prefix = `${sessionId}:`;
  const ids = new Map<string, string>();
  for (const row of fixtureCase.rows) {
    const id = await seedTurnAt(t.ctx, sessionId, {
      id: prefix + row.id,
      startedAt: row.started_at,
      createdAt: row.created_at,
      completedAt: row.completed_at,
      metadata: row.metadata,
    });
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
    const { sessionId, ids } = await seedCase(t, fixtureCase);

    const current = await getCurrentTurn(t.ctx, sessionId);
    expect(current === undefined ? null : ids.get(current.id)).toBe(fixtureCase.expectedCurrentTurnId);

    // D10: the active turn is the first open conversational turn under the same order.
    const openTurns = fixtureCase.turns.filter((turn) => turn.completed_at == null);
    const active = await getActiveTurn(t.ctx, sessionId);
    expect(active === undefined ? null : ids.get(active.id)).toBe(newestDurableTurnId(openTurns));
    if (active !== undefined) expect(active.completedAt).toBeNull();
  });
});
