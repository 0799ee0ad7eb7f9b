import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findActiveClarificationMessages, listUnresolvedClarificationBundles } from '../../src/repository/clarifications.js';
import { claimClarificationBundle } from '../../src/repository/clarificationClaims.js';
import { createMessage } from '../../src/repository/messages.js';
import { getPendingActionsBySessionIds } from '../../src/repository/pendingActions.js';
import { getCurrentTurn } from '../../src/repository/turns.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

describeEachDialect('spec scenarios on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  it('keeps the open turn current when the resume path writes a lifecycle turn 0.8s later (scenario 1)', async () => {
    const { sessionId, workspaceId } = await seedSession(t.ctx);
    const realTurn = await seedTurnAt(t.ctx, sessionId, { startedAt: '2026-08-20T01:40:08.937Z' });
    // The real write path: a boot message on resume creates and marks its own lifecycle turn.
    const boot = await createMessage(t.ctx, { sessionId, type: 'script_execution', content: 'agent boot', completedTurn: true });
    expect(boot.turnId).not.toBe(realTurn);
    const { pendingId } = await seedClarificationBundle(t.ctx, { sessionId, turnId: realTurn });

    expect((await getCurrentTurn(t.ctx, sessionId))?.id).toBe(realTurn);
    expect((await getPendingActionsBySessionIds(t.ctx, [sessionId])).get(sessionId)).toBe('clarification');
    expect((await findActiveClarificationMessages(t.ctx, sessionId)).map((m) => m.metadata.pending_id)).toEqual([pendingId]);
    const page = await listUnresolvedClarificationBundles(t.ctx, { workspaceId, limit: 10 });
    expect(page.bundles.map((b) => b.pendingId)).toEqual([pendingId]);
    const claim = await claimClarificationBundle(t.ctx, pendingId, {
      status: 'answered',
      answers: new Map([['q1', { question_id: 'q1', selected_options: ['a'], custom_text: '' }]]),
    });
    expect(claim.claimed).toBe(true);
  });
});
