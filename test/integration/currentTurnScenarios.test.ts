import { afterAll, beforeAll, expect, it } from 'vitest';
import { findActiveClarificationMessages, listUnresolvedClarificationBundles } from '../../src/repository/clarifications/clarifications.js';
import { claimClarificationBundle } from '../../src/repository/clarifications/clarificationClaims.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { migrateSchema } from '../../src/repository/migrate.js';
import { getPendingActionsBySessionIds } from '../../src/repository/projection/pendingActions.js';
import { getCurrentTurn } from '../../src/repository/turns/turns.js';
import type { TestDatabase } from '../support/databases.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, serviceContext, type RowWriter } from '../support/rowWriters.js';

// Beside Kandev's schema the rows are Kandev's (raw, in its timestamp text: the lifecycle turn as
// Kandev's createCompletedTurn writes it), read through the context the service builds after its
// migrations. The end-to-end side of every scenario is test/e2e/currentTurnScenariosThroughWorker.test.ts.
describeEachSchemaAndDialect('spec scenarios on %s', (dialect, schema) => {
  let t: TestDatabase;
  let ctx: RepositoryContext;
  let w: RowWriter;
  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema);
    if (schema === 'kandev') await migrateSchema(t.db);
    ctx = await serviceContext(t, schema);
    w = rowWriter(schema, t.ctx);
  });
  afterAll(async () => {
    await t.close();
  });

  it('keeps the open turn current when the resume path writes a lifecycle turn 0.8s later (scenario 1)', async () => {
    const { sessionId, workspaceId } = await w.session();
    const realTurn = await w.turnAt(sessionId, { startedAt: '2026-08-20T01:40:08.937Z' });
    // The real write path: a boot message on resume creates and marks its own lifecycle turn.
    const boot = await w.message({ sessionId, type: 'script_execution', content: 'agent boot', completedTurn: true });
    expect(boot.turnId).not.toBe(realTurn);
    const { pendingId } = await w.bundle({ sessionId, turnId: realTurn });

    expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(realTurn);
    expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
    expect((await findActiveClarificationMessages(ctx, sessionId)).map((m) => m.metadata.pending_id)).toEqual([pendingId]);
    const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
    expect(page.bundles.map((b) => b.pendingId)).toEqual([pendingId]);
    const claim = await claimClarificationBundle(ctx, pendingId, {
      status: 'answered',
      answers: new Map([['q1', { question_id: 'q1', selected_options: ['a'], custom_text: '' }]]),
    });
    expect(claim.claimed).toBe(true);
  });
});
