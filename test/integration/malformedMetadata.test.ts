import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimClarificationBundle } from '../../src/repository/clarifications/clarificationClaims.js';
import {
  detachActiveClarifications,
  expireActiveClarificationBundle,
  findActiveClarificationMessages,
  findMessagesByPendingId,
  listUnresolvedClarificationBundles,
} from '../../src/repository/clarifications/clarifications.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { getMessage, setMessageMetadataText } from '../support/messages.js';
import { getPendingActionsBySessionIds, loadTaskPendingState } from '../../src/repository/projection/pendingActions.js';
import { completeTurn, getActiveTurn, getCurrentTurn, listVisibleTurns, patchTurnMetadata, startTurn } from '../../src/repository/turns/turns.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

const T0 = '2026-08-23T09:00:00.000000Z';
const at = (offsetMs: number): string => toCanonicalTimestamp(new Date(Date.parse(T0) + offsetMs));

/** Metadata texts other producers have written: every one must read as a document with no keys. */
const MALFORMED: Array<[string, string | null]> = [
  ['NULL', null],
  ["''", ''],
  ["'not json'", 'not json'],
  ['a truncated lifecycle marker', '{"lifecycle_only": true'],
  ['a JSON array', '[{"lifecycle_only": true}]'],
  ['a JSON string', '"lifecycle_only"'],
];

const answerQ1 = {
  status: 'answered' as const,
  answers: new Map([['q1', { question_id: 'q1', selected_options: ['a'], custom_text: '' }]]),
};

async function rawMetadata(ctx: RepositoryContext, table: 'task_session_turns' | 'task_session_messages', id: string): Promise<unknown> {
  const row = await ctx.knex(table).select('metadata').where({ id }).first();
  return row?.metadata;
}

describeEachDialect('malformed metadata on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  describe.each(MALFORMED)('a turn whose metadata is %s', (_label, raw) => {
    it('is conversational: it supersedes an older bundle in every read, without error', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, taskId, workspaceId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: old.id });
      await completeTurn(ctx, old.id, at(1_000));
      const malformed = await seedTurnAt(ctx, sessionId, { startedAt: at(2_000), metadata: raw });

      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(malformed);
      expect((await getActiveTurn(ctx, sessionId))?.id).toBe(malformed);
      const visible = await listVisibleTurns(ctx, sessionId);
      expect(visible.map((v) => [v.id, v.metadata, v.metadataValid])).toEqual([
        [old.id, {}, true],
        [malformed, {}, false],
      ]);
      expect(await getPendingActionsBySessionIds(ctx, [sessionId])).toEqual(new Map());
      expect((await loadTaskPendingState(ctx, taskId))?.pendingAction).toBeNull();
      expect(await findActiveClarificationMessages(ctx, sessionId)).toEqual([]);
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
      expect(await detachActiveClarifications(ctx, sessionId)).toEqual([]);
      expect(await expireActiveClarificationBundle(ctx, sessionId, pendingId)).toEqual([]);
      expect((await claimClarificationBundle(ctx, pendingId, answerQ1)).claimed).toBe(false);
      expect(await rawMetadata(ctx, 'task_session_turns', malformed)).toBe(raw);
    });

    it('owns its own bundle: listed, pending, detachable and claimable', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const malformed = await seedTurnAt(ctx, sessionId, { startedAt: at(0), metadata: raw });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: malformed });

      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
      expect((await findActiveClarificationMessages(ctx, sessionId)).map((m) => m.metadata.pending_id)).toEqual([pendingId]);
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles.map((b) => b.turnId)).toEqual([malformed]);
      expect(await detachActiveClarifications(ctx, sessionId)).toHaveLength(1);
      expect((await claimClarificationBundle(ctx, pendingId, answerQ1)).claimed).toBe(true);
    });

    it('takes a metadata patch as if it had no keys', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await seedTurnAt(ctx, sessionId, { startedAt: at(0), metadata: raw });
      expect(await patchTurnMetadata(ctx, turn, { prompt_dispatch_attempted: true })).toBe(true);
      expect(JSON.parse(String(await rawMetadata(ctx, 'task_session_turns', turn)))).toEqual({ prompt_dispatch_attempted: true });
    });
  });

  describe.each(MALFORMED)('a clarification row whose metadata is %s', (_label, raw) => {
    async function sessionWithMalformedRow(ctx: RepositoryContext) {
      const seeded = await seedSession(ctx);
      const turn = await startTurn(ctx, seeded.sessionId);
      const row = await createMessage(ctx, {
        sessionId: seeded.sessionId,
        turnId: turn.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: randomUUID(), question_id: 'q1', status: 'pending' },
      });
      await setMessageMetadataText(ctx, row.id, raw);
      return { ...seeded, turnId: turn.id, rowId: row.id };
    }

    it('is not pending: alone on the current turn it leaves the session with nothing to answer', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, taskId, workspaceId, rowId } = await sessionWithMalformedRow(ctx);

      expect(await findActiveClarificationMessages(ctx, sessionId)).toEqual([]);
      expect(await getPendingActionsBySessionIds(ctx, [sessionId])).toEqual(new Map());
      expect((await loadTaskPendingState(ctx, taskId))?.pendingAction).toBeNull();
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
      expect(await detachActiveClarifications(ctx, sessionId)).toEqual([]);
      expect(await rawMetadata(ctx, 'task_session_messages', rowId)).toBe(raw);
      const record = await getMessage(ctx, rowId);
      expect([record?.metadata, record?.metadataValid]).toEqual([{}, false]);
    });

    it('never fails the reads and writes of a valid bundle beside it', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, workspaceId, rowId } = await sessionWithMalformedRow(ctx);
      const { pendingId, messages } = await seedClarificationBundle(ctx, { sessionId, turnId, statuses: ['pending', undefined] });
      const ids = messages.map((m) => m.id);

      expect((await findActiveClarificationMessages(ctx, sessionId)).map((m) => m.id)).toEqual(ids);
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => [b.pendingId, b.questions.length])).toEqual([[pendingId, 2]]);
      expect((await findMessagesByPendingId(ctx, pendingId)).map((m) => m.id)).toEqual(ids);
      expect((await detachActiveClarifications(ctx, sessionId)).map((m) => m.id)).toEqual(ids);
      expect((await claimClarificationBundle(ctx, pendingId, { status: 'rejected' })).claimed).toBe(true);
      expect(await rawMetadata(ctx, 'task_session_messages', rowId)).toBe(raw);
    });

    it('leaves an expiry of the valid bundle beside it to that bundle alone', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, rowId } = await sessionWithMalformedRow(ctx);
      const { pendingId, messages } = await seedClarificationBundle(ctx, { sessionId, turnId });
      expect((await expireActiveClarificationBundle(ctx, sessionId, pendingId)).map((m) => m.id)).toEqual([messages[0]?.id]);
      expect(await rawMetadata(ctx, 'task_session_messages', rowId)).toBe(raw);
    });
  });

  describe.each(MALFORMED)('a permission row whose metadata is %s', (_label, raw) => {
    it('is not a pending permission and does not hide a clarification', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const permission = await createMessage(ctx, { sessionId, turnId: turn.id, type: 'permission_request', content: 'allow?' });
      await setMessageMetadataText(ctx, permission.id, raw);
      expect(await getPendingActionsBySessionIds(ctx, [sessionId])).toEqual(new Map());

      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
    });
  });
});
