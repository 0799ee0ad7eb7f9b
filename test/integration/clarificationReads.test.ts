import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimClarificationBundle } from '../../src/repository/clarifications/clarificationClaims.js';
import {
  InvalidCursorError,
  detachActiveClarifications,
  findActiveClarificationMessages,
  listUnresolvedClarificationBundles,
} from '../../src/repository/clarifications/clarifications.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { deleteMessage } from '../support/messages.js';
import { getPendingActionsBySessionIds } from '../../src/repository/projection/pendingActions.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import { completeTurn, patchTurnMetadata, startTurn } from '../../src/repository/turns/turns.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

const T0 = '2026-08-21T08:00:00.000000Z';
const at = (offsetMs: number): string => toCanonicalTimestamp(new Date(Date.parse(T0) + offsetMs));

const answerAll = (...questionIds: string[]) => ({
  status: 'answered' as const,
  answers: new Map(questionIds.map((id) => [id, { question_id: id, selected_options: ['a'], custom_text: '' }])),
});

/** The four consumers the ADR names, read for one session and one bundle. */
async function consumers(ctx: RepositoryContext, sessionId: string, workspaceId: string) {
  return {
    guard: (await findActiveClarificationMessages(ctx, sessionId)).map((m) => m.metadata.pending_id),
    pendingAction: (await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId) ?? null,
    listed: (await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 50 })).bundles.map((b) => b.pendingId),
  };
}

describeEachDialect('clarification reads on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  describe('active clarification rows of the current turn', () => {
    it('treats a missing status and "pending" as active and "answered" as not', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const { messages } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: [undefined, 'pending', 'answered'] });

      const active = await findActiveClarificationMessages(ctx, sessionId);
      expect(active.map((m) => m.id)).toEqual([messages[0]?.id, messages[1]?.id]);
      expect(active[0]?.metadata.status).toBeUndefined();
    });

    it('reports no active rows once every row of the bundle is answered', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: ['answered', 'rejected', 'expired', 'cancelled'] });
      expect(await findActiveClarificationMessages(ctx, sessionId)).toEqual([]);
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).has(sessionId)).toBe(false);
    });

    it('breaks an exact timestamp tie between turns by the greater id, whatever the insert order', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      for (const order of [
        ['low', 'high'],
        ['high', 'low'],
      ] as const) {
        const { sessionId, workspaceId } = await seedSession(ctx);
        const ids = { low: `00000000-${sessionId}`, high: `ffffffff-${sessionId}` };
        for (const which of order) await seedTurnAt(ctx, sessionId, { id: ids[which], startedAt: at(1_000) });
        const onLow = await seedClarificationBundle(ctx, { sessionId, turnId: ids.low });
        const onHigh = await seedClarificationBundle(ctx, { sessionId, turnId: ids.high });

        expect(await consumers(ctx, sessionId, workspaceId)).toEqual({
          guard: [onHigh.pendingId],
          pendingAction: 'clarification',
          listed: [onHigh.pendingId],
        });
        expect((await claimClarificationBundle(ctx, onLow.pendingId, answerAll('q1'))).claimed).toBe(false);
      }
    });

    it('reads only the session’s own rows even when another session’s row points at its current turn', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const a = await seedSession(ctx);
      const b = await seedSession(ctx);
      const turnA = await startTurn(ctx, a.sessionId);
      await startTurn(ctx, b.sessionId);
      // A malformed row: session b, but turn_id of session a's current turn.
      await createMessage(ctx, {
        sessionId: b.sessionId,
        turnId: turnA.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: randomUUID(), question_id: 'q1' },
      });
      expect(await findActiveClarificationMessages(ctx, a.sessionId)).toEqual([]);
      expect(await findActiveClarificationMessages(ctx, b.sessionId)).toEqual([]);
    });
  });

  describe('ownership never moves backward (ADR)', () => {
    it('never reactivates an older bundle when the newer turn’s only message is deleted', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: old.id });
      await completeTurn(ctx, old.id, at(1_000));
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [pendingId], pendingAction: 'clarification', listed: [pendingId] });

      const newer = await startTurn(ctx, sessionId, { startedAt: at(2_000) });
      const only = await createMessage(ctx, { sessionId, turnId: newer.id, authorType: 'user', content: 'next task' });
      const inert = { guard: [], pendingAction: null, listed: [] };
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual(inert);

      expect(await deleteMessage(ctx, only.id)).toBe(true);
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual(inert);
      expect((await claimClarificationBundle(ctx, pendingId, answerAll('q1'))).claimed).toBe(false);
    });

    it('keeps a detached question pending and answerable while its turn is current', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: ['pending', undefined] });
      expect(await detachActiveClarifications(ctx, sessionId)).toHaveLength(2);
      await completeTurn(ctx, turn.id);

      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [pendingId, pendingId], pendingAction: 'clarification', listed: [pendingId] });
      const [bundle] = (await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles;
      expect(bundle?.questions.map((q) => [q.questionId, q.status, q.agentDisconnected])).toEqual([
        ['q1', 'pending', true],
        ['q2', 'pending', true],
      ]);
      expect((await claimClarificationBundle(ctx, pendingId, answerAll('q1', 'q2'))).claimed).toBe(true);
    });

    it('makes older pending rows inert once a newer turn is accepted: guard, pending action, listing and claim all ignore them', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId, messages } = await seedClarificationBundle(ctx, { sessionId, turnId: old.id, metadata: { agent_disconnected: true } });
      await completeTurn(ctx, old.id, at(1_000));
      await startTurn(ctx, sessionId, { startedAt: at(2_000) });

      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [], pendingAction: null, listed: [] });
      expect((await claimClarificationBundle(ctx, pendingId, answerAll('q1'))).claimed).toBe(false);
      // Inert, not rewritten: the row keeps its pending status as audit evidence.
      const row = await ctx.knex('task_session_messages').where({ id: messages[0]?.id }).first();
      expect(JSON.parse(String(row.metadata)).status).toBe('pending');
    });

    it('keeps the bundle current under an empty prompt_dispatch_pending reservation and supersedes it once a message lands there', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      const reservation = await seedTurnAt(ctx, sessionId, { startedAt: at(5_000), metadata: { prompt_dispatch_pending: 'true' } });
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [pendingId], pendingAction: 'clarification', listed: [pendingId] });

      await createMessage(ctx, { sessionId, turnId: reservation, authorType: 'user', content: 'prompt' });
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [], pendingAction: null, listed: [] });
      expect((await claimClarificationBundle(ctx, pendingId, answerAll('q1'))).claimed).toBe(false);
    });

    it('supersedes the bundle with an attempted reservation that has no message', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      const reservation = await startTurn(ctx, sessionId, { startedAt: at(5_000), metadata: { prompt_dispatch_pending: true } });
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [pendingId], pendingAction: 'clarification', listed: [pendingId] });

      await patchTurnMetadata(ctx, reservation.id, { prompt_dispatch_attempted: '1' });
      expect(await consumers(ctx, sessionId, workspaceId)).toEqual({ guard: [], pendingAction: null, listed: [] });
      expect((await claimClarificationBundle(ctx, pendingId, answerAll('q1'))).claimed).toBe(false);
    });
  });

  describe('listing unresolved bundles', () => {
    it('never lists a malformed bundle the claim would refuse (pending_id spanning two sessions or two turns)', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const first = await seedSession(ctx);
      const second = await seedSession(ctx, { workspaceId: first.workspaceId });
      const turnA = await startTurn(ctx, first.sessionId);
      const turnB = await startTurn(ctx, second.sessionId);
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId: first.sessionId, turnId: turnA.id });
      await seedClarificationBundle(ctx, { sessionId: second.sessionId, turnId: turnB.id, pendingId });
      const spanning = await seedSession(ctx, { workspaceId: first.workspaceId });
      const older = await startTurn(ctx, spanning.sessionId);
      const { pendingId: spanningId } = await seedClarificationBundle(ctx, { sessionId: spanning.sessionId, turnId: older.id });
      await completeTurn(ctx, older.id);
      const newer = await startTurn(ctx, spanning.sessionId);
      await seedClarificationBundle(ctx, { sessionId: spanning.sessionId, turnId: newer.id, pendingId: spanningId });

      const listed = (await listUnresolvedClarificationBundles(ctx, { workspaceId: first.workspaceId, limit: 10 })).bundles.map((b) => b.pendingId);
      expect(listed).toEqual([]);
      expect((await claimClarificationBundle(ctx, pendingId, { status: 'rejected' })).claimed).toBe(false);
      expect((await claimClarificationBundle(ctx, spanningId, { status: 'rejected' })).claimed).toBe(false);
    });

    it('lists a pending bundle with its session, task, workspace, turn and ordered questions', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, taskId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const { pendingId, messages } = await seedClarificationBundle(ctx, {
        sessionId,
        turnId: turn.id,
        statuses: ['pending', 'pending'],
        createdAt: at(10_000),
      });

      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.nextCursor).toBeNull();
      expect(page.bundles).toHaveLength(1);
      expect(page.bundles[0]).toMatchObject({ pendingId, sessionId, taskId, workspaceId, turnId: turn.id, createdAt: at(10_000), context: 'seeded' });
      expect(page.bundles[0]?.questions.map((q) => [q.messageId, q.questionId, q.status, q.agentDisconnected])).toEqual([
        [messages[0]?.id, 'q1', 'pending', false],
        [messages[1]?.id, 'q2', 'pending', false],
      ]);
    });

    it('counts an absent status as pending', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: [undefined] });
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => [b.pendingId, b.questions[0]?.status])).toEqual([[pendingId, 'pending']]);
    });

    it('excludes an all-terminal bundle and includes a mixed one', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: ['answered', 'rejected'] });
      const mixed = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: ['answered', 'pending'] });
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => b.pendingId)).toEqual([mixed.pendingId]);
      expect(page.bundles[0]?.questions.map((q) => q.status)).toEqual(['answered', 'pending']);
    });

    it.each([true, 1, 'true', '1'])('excludes a parent_question=%j bundle on both dialects alike', async (marker) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, metadata: { parent_question: marker, parent_question_id: 'pq' } });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
    });

    it.each([false, 0, 'false', '0', 'yes', null])('lists a bundle whose parent_question=%j is not a truthy flag', async (marker) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, metadata: { parent_question: marker } });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles.map((b) => b.pendingId)).toEqual([pendingId]);
    });

    it('excludes a bundle when only one of its rows carries the parent_question marker', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const pendingId = randomUUID();
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, pendingId });
      await createMessage(ctx, {
        sessionId,
        turnId: turn.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: pendingId, question_id: 'q9', parent_question: 'true' },
      });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
    });

    it('excludes superseded-turn and terminal-session bundles', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const superseded = await seedSession(ctx, { workspaceId: 'ws-excluded' });
      const old = await startTurn(ctx, superseded.sessionId, { startedAt: at(0) });
      await seedClarificationBundle(ctx, { sessionId: superseded.sessionId, turnId: old.id });
      await startTurn(ctx, superseded.sessionId, { startedAt: at(1_000) });
      const terminal = await seedSession(ctx, { workspaceId: 'ws-excluded' });
      const turn = await startTurn(ctx, terminal.sessionId);
      await seedClarificationBundle(ctx, { sessionId: terminal.sessionId, turnId: turn.id });
      const live = await seedSession(ctx, { workspaceId: 'ws-excluded' });
      const liveTurn = await startTurn(ctx, live.sessionId);
      const listed = await seedClarificationBundle(ctx, { sessionId: live.sessionId, turnId: liveTurn.id });

      await setSessionState(ctx, terminal.sessionId, 'COMPLETED');

      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId: 'ws-excluded', limit: 10 })).bundles.map((b) => b.pendingId)).toEqual([
        listed.pendingId,
      ]);
      // The state alone decided: the same bundle is listed while the session can run.
      await setSessionState(ctx, terminal.sessionId, 'RUNNING');
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId: 'ws-excluded', limit: 10 })).bundles).toHaveLength(2);
      await setSessionState(ctx, terminal.sessionId, 'CANCELLED');
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId: 'ws-excluded', limit: 10 })).bundles.map((b) => b.pendingId)).toEqual([
        listed.pendingId,
      ]);
    });

    it('excludes a bundle with an empty question id', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const pendingId = randomUUID();
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, pendingId });
      await createMessage(ctx, {
        sessionId,
        turnId: turn.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: pendingId, question_id: '', question: { id: '', prompt: 'no id' }, status: 'pending' },
      });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
    });

    it('excludes a bundle with an unrecognised status even beside a pending sibling', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: ['pending', 'snoozed'] });
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, statuses: ['pending', 'PENDING'] });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
    });

    it('includes a bundle whose only question id is the nested question.id', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const pendingId = randomUUID();
      await createMessage(ctx, {
        sessionId,
        turnId: turn.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: pendingId, question: { id: 'nested-1', prompt: 'Which?' }, status: 'pending' },
      });
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => [b.pendingId, b.questions.map((q) => q.questionId)])).toEqual([[pendingId, ['nested-1']]]);
    });

    it('reports the session’s task even when the message row carries no task_id', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, taskId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const { messages } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      await ctx.knex('task_session_messages').where({ id: messages[0]?.id }).update({ task_id: '' });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles.map((b) => b.taskId)).toEqual([taskId]);
    });

    it('filters by workspace', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const mine = await seedSession(ctx);
      const theirs = await seedSession(ctx);
      const a = await seedClarificationBundle(ctx, { sessionId: mine.sessionId, turnId: (await startTurn(ctx, mine.sessionId)).id });
      const b = await seedClarificationBundle(ctx, { sessionId: theirs.sessionId, turnId: (await startTurn(ctx, theirs.sessionId)).id });
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId: mine.workspaceId, limit: 10 })).bundles.map((x) => x.pendingId)).toEqual([
        a.pendingId,
      ]);
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId: theirs.workspaceId, limit: 10 })).bundles.map((x) => x.pendingId)).toEqual([
        b.pendingId,
      ]);
      const all = (await listUnresolvedClarificationBundles(ctx, { limit: 10_000 })).bundles.map((x) => x.pendingId);
      expect(all).toEqual(expect.arrayContaining([a.pendingId, b.pendingId]));
    });

    it('lists only bundles created at or after created_since', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, createdAt: at(1_000) });
      const onTheMark = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, createdAt: at(2_000) });
      const later = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, createdAt: at(3_000) });
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, createdSince: at(2_000), limit: 10 });
      expect(page.bundles.map((b) => b.pendingId)).toEqual([onTheMark.pendingId, later.pendingId]);
    });

    it('pages through bundles with a cursor, filling every page of 2 across 3 pages despite excluded bundles in between', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const turn = await startTurn(ctx, sessionId, { startedAt: at(1_000) });
      await completeTurn(ctx, old.id, at(500));
      const expected: string[] = [];
      for (let i = 0; i < 6; i += 1) {
        // Two bundles share each created_at, so the pending_id tie-break is exercised too.
        const createdAt = at(10_000 + Math.floor(i / 2) * 1_000);
        // Within each pair the later-written bundle has the smaller pending_id.
        expected.push((await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, createdAt, pendingId: `p-${9 - i}-${randomUUID()}` })).pendingId);
        await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, createdAt, statuses: ['answered'] });
        await seedClarificationBundle(ctx, { sessionId, turnId: old.id, createdAt });
      }

      const seen: string[][] = [];
      let cursor: string | undefined;
      for (let pageNo = 0; pageNo < 3; pageNo += 1) {
        const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 2, cursor });
        seen.push(page.bundles.map((b) => b.pendingId));
        if (pageNo < 2) expect(page.nextCursor).not.toBeNull();
        else expect(page.nextCursor).toBeNull();
        cursor = page.nextCursor ?? undefined;
      }
      expect(seen).toEqual([
        [expected[1], expected[0]],
        [expected[3], expected[2]],
        [expected[5], expected[4]],
      ]);
    });

    // The last one names a pending id with a NUL, which PostgreSQL cannot even compare (22021).
    it.each([
      'not-a-cursor',
      Buffer.from('{"a":1}').toString('base64url'),
      Buffer.from('["yesterday","p"]').toString('base64url'),
      '',
      Buffer.from('["2026-01-01T00:00:00Z","p\\u0000"]').toString('base64url'),
    ])('rejects the cursor %j with InvalidCursorError', async (cursor) => {
      await expect(listUnresolvedClarificationBundles(t.ctx, { workspaceId: 'ws-any', limit: 2, cursor })).rejects.toBeInstanceOf(InvalidCursorError);
    });
  });
});
