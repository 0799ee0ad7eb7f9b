import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listUnresolvedClarificationBundles } from '../../src/repository/clarifications/clarifications.js';
import { createRepositoryContext, type RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { getPendingActionsBySessionIds, loadTaskPendingState } from '../../src/repository/projection/pendingActions.js';
import { createSession } from '../../src/repository/tasks/tasks.js';
import { listVisibleTurns, startTurn } from '../../src/repository/turns/turns.js';
import { toKandevTimestamp } from '../../src/timestamps.js';
import type { PendingAction } from '../../src/turns/pendingAction.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';
import { kandevContext } from '../support/timestampTexts.js';

/**
 * The windowed pending-action statement and the bundle listing over columns where Kandev's rows
 * (`2026-08-20 10:00:05+00:00`) and canonical rows (`2026-08-20T10:00:00.000000000Z`) sit side by
 * side, arranged so that text order and time order disagree (' ' sorts before 'T'): every answer
 * below is the time-ordered one, on both dialects. On SQLite the same rows read as canonical-only
 * text resolve differently, which shows each arrangement tests the ordering.
 */

const kandevText = (canonical: string) => toKandevTimestamp(canonical);
const canonicalText = (canonical: string) => canonical;

describeEachDialect('mixed timestamp forms in one column on %s', (dialect) => {
  let t: TestDatabase;
  /** Writes Kandev's form; reads either form. */
  let kandev: RepositoryContext;
  /** Writes the canonical form; reads either form. */
  let canonical: RepositoryContext;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    kandev = kandevContext(t.ctx, { mixed: true, writes: 'kandev' });
    canonical = kandevContext(t.ctx, { mixed: true, writes: 'canonical' });
  });
  afterAll(async () => {
    await t.close();
  });

  /**
   * Session ids, the pending action each must resolve to (absent: none), and those whose rows read as
   * canonical-only text resolve otherwise (canonical text of the same date sorts above Kandev's).
   */
  async function seedPendingActionCases(): Promise<{ sessionIds: string[]; expected: Map<string, PendingAction>; textOrderMisleads: string[] }> {
    const expected = new Map<string, PendingAction>();
    const sessionIds: string[] = [];
    const textOrderMisleads: string[] = [];

    // The newer turn (Kandev text) owns the session; the older one (canonical text) holds a pending
    // question that must stay inert.
    {
      const { sessionId, taskId } = await seedSession(kandev);
      const older = await seedTurnAt(canonical, sessionId, { startedAt: '2026-08-20T10:00:00Z', completedAt: '2026-08-20T10:00:01Z' }, canonicalText);
      const newer = await seedTurnAt(kandev, sessionId, { startedAt: '2026-08-20T10:00:05Z', completedAt: '2026-08-20T10:00:06Z' }, kandevText);
      await seedClarificationBundle(canonical, { sessionId, turnId: older });
      await seedClarificationBundle(kandev, { sessionId, turnId: newer, statuses: ['answered'] });
      // A second session of the same task, in the other arrangement (the newer turn is canonical text,
      // 50 ms later), which text order happens to get right.
      const second = await createSession(kandev, { taskId, state: 'RUNNING' });
      const olderK = await seedTurnAt(kandev, second.id, { startedAt: '2026-08-20T10:00:00.5Z', completedAt: '2026-08-20T10:00:01Z' }, kandevText);
      const newerC = await seedTurnAt(canonical, second.id, { startedAt: '2026-08-20T10:00:00.55Z', completedAt: '2026-08-20T10:00:01Z' }, canonicalText);
      await seedClarificationBundle(kandev, { sessionId: second.id, turnId: olderK, statuses: ['answered'] });
      await seedClarificationBundle(canonical, { sessionId: second.id, turnId: newerC });
      sessionIds.push(sessionId, second.id);
      expected.set(second.id, 'clarification');
      textOrderMisleads.push(sessionId);
    }

    // Sub-second, the first arrangement again: a canonical `.5` turn and a newer Kandev `.55` one.
    {
      const { sessionId } = await seedSession(kandev);
      const older = await seedTurnAt(canonical, sessionId, { startedAt: '2026-08-20T10:00:00.5Z' }, canonicalText);
      const newer = await seedTurnAt(kandev, sessionId, { startedAt: '2026-08-20T10:00:00.55Z' }, kandevText);
      await seedClarificationBundle(canonical, { sessionId, turnId: older });
      await createMessage(kandev, { sessionId, turnId: newer, authorType: 'user', content: 'carry on' });
      sessionIds.push(sessionId);
      textOrderMisleads.push(sessionId);
    }

    // Permission rows of one turn: the newest decides. Kandev's pending row is newer than the
    // canonical resolved one, by a second, by 50 ms (`.5` against `.45`), or not at all (an exact
    // tie, where the greater id decides).
    for (const [pendingAt, resolvedAt] of [
      ['2026-08-20T10:00:02Z', '2026-08-20T10:00:01Z'],
      ['2026-08-20T10:00:01.5Z', '2026-08-20T10:00:01.45Z'],
      ['2026-08-20T10:00:03Z', '2026-08-20T10:00:03.000000Z'],
    ] as const) {
      const { sessionId } = await seedSession(kandev);
      const turn = await startTurn(kandev, sessionId, { startedAt: '2026-08-20T10:00:00Z' });
      await createMessage(canonical, {
        id: `a-${sessionId}`,
        sessionId,
        turnId: turn.id,
        type: 'permission_request',
        metadata: { status: 'approved' },
        createdAt: resolvedAt,
      });
      await createMessage(kandev, {
        id: `b-${sessionId}`,
        sessionId,
        turnId: turn.id,
        type: 'permission_request',
        metadata: { status: 'pending' },
        createdAt: pendingAt,
      });
      sessionIds.push(sessionId);
      expected.set(sessionId, 'permission');
      textOrderMisleads.push(sessionId);
    }
    return { sessionIds, expected, textOrderMisleads };
  }

  it('resolves current turns and the newest permission row by instant in one windowed statement', async () => {
    const { sessionIds, expected, textOrderMisleads } = await seedPendingActionCases();
    expect(await getPendingActionsBySessionIds(kandev, sessionIds)).toEqual(expected);
    // Session by session, the same answers: one session's rows never decide another's.
    for (const sessionId of sessionIds) expect((await getPendingActionsBySessionIds(canonical, [sessionId])).get(sessionId)).toBe(expected.get(sessionId));
    if (dialect === 'sqlite') {
      const asStored = await getPendingActionsBySessionIds(createRepositoryContext(t.db), sessionIds);
      for (const sessionId of textOrderMisleads) expect(asStored.get(sessionId), sessionId).not.toBe(expected.get(sessionId));
    }
  });

  it("orders a task's sessions by their start instant, whichever text each start was written in", async () => {
    const { taskId, sessionId: first } = await seedSession(canonical);
    await canonical.knex('task_sessions').where({ id: first }).update({ started_at: '2026-08-20T10:00:00.000000000Z' });
    const second = await createSession(kandev, { taskId, startedAt: '2026-08-20T10:00:01Z' });
    const third = await createSession(canonical, { taskId, startedAt: '2026-08-20T10:00:02Z' });
    const state = await loadTaskPendingState(kandev, taskId);
    expect(state?.sessions.map((s) => s.sessionId)).toEqual([first, second.id, third.id]);
  });

  it('lists visible turns oldest first by instant, with canonical timestamps', async () => {
    const { sessionId } = await seedSession(kandev);
    const b = await seedTurnAt(kandev, sessionId, { id: `${sessionId}:b`, startedAt: '2026-08-20T10:00:00.5Z' }, kandevText);
    const a = await seedTurnAt(canonical, sessionId, { id: `${sessionId}:a`, startedAt: '2026-08-20T10:00:00.45Z' }, canonicalText);
    const c = await seedTurnAt(kandev, sessionId, { id: `${sessionId}:c`, startedAt: '2026-08-20T10:00:00Z' }, kandevText);
    const turns = await listVisibleTurns(kandev, sessionId);
    expect(turns.map((turn) => turn.id)).toEqual([c, a, b]);
    expect(turns.map((turn) => turn.startedAt)).toEqual(['2026-08-20T10:00:00.000000000Z', '2026-08-20T10:00:00.450000000Z', '2026-08-20T10:00:00.500000000Z']);
  });

  describe('listing unresolved bundles', () => {
    it('pages by instant across forms, with canonical created_at and cursors, and created_since compares instants', async () => {
      const { sessionId, workspaceId } = await seedSession(kandev);
      const turn = await startTurn(kandev, sessionId, { startedAt: '2026-08-20T09:00:00Z' });
      // Time order of the bundles; their texts alternate so that text order is different, and the
      // first pair ties on the instant (`…:01+00:00` against `…:01.000000000Z`): pending_id decides.
      const plan = [
        { at: '2026-08-20T10:00:01Z', ctx: kandev, pendingId: 'p-1' },
        { at: '2026-08-20T10:00:01.000000Z', ctx: canonical, pendingId: 'p-2' },
        { at: '2026-08-20T10:00:01.45Z', ctx: canonical, pendingId: 'p-3' },
        { at: '2026-08-20T10:00:01.5Z', ctx: kandev, pendingId: 'p-4' },
        { at: '2026-08-20T10:00:01.500001Z', ctx: canonical, pendingId: 'p-5' },
        { at: '2026-08-20T10:00:02Z', ctx: kandev, pendingId: 'p-6' },
      ];
      for (const bundle of [...plan].reverse()) {
        await seedClarificationBundle(bundle.ctx, { sessionId, turnId: turn.id, createdAt: bundle.at, pendingId: `${bundle.pendingId}-${sessionId}` });
      }
      const expected = plan.map((bundle) => `${bundle.pendingId}-${sessionId}`);

      const seen: string[] = [];
      const createdAts: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 3; page += 1) {
        const result = await listUnresolvedClarificationBundles(kandev, { workspaceId, limit: 2, cursor });
        seen.push(...result.bundles.map((b) => b.pendingId));
        createdAts.push(...result.bundles.map((b) => b.createdAt));
        if (page < 2) expect(result.nextCursor).not.toBeNull();
        else expect(result.nextCursor).toBeNull();
        cursor = result.nextCursor ?? undefined;
      }
      expect(seen).toEqual(expected);
      expect(createdAts).toEqual([
        '2026-08-20T10:00:01.000000000Z',
        '2026-08-20T10:00:01.000000000Z',
        '2026-08-20T10:00:01.450000000Z',
        '2026-08-20T10:00:01.500000000Z',
        '2026-08-20T10:00:01.500001000Z',
        '2026-08-20T10:00:02.000000000Z',
      ]);

      const since = await listUnresolvedClarificationBundles(kandev, { workspaceId, limit: 10, createdSince: '2026-08-20T10:00:01.5Z' });
      expect(since.bundles.map((b) => b.pendingId)).toEqual(expected.slice(3));

      if (dialect === 'sqlite') {
        const asStored = await listUnresolvedClarificationBundles(createRepositoryContext(t.db), { workspaceId, limit: 10 });
        expect(asStored.bundles.map((b) => b.pendingId)).not.toEqual(expected);
      }
    });

    it("dates a bundle by its earliest row's instant when its rows were written in different forms", async () => {
      const { sessionId, workspaceId } = await seedSession(kandev);
      const turn = await startTurn(kandev, sessionId, { startedAt: '2026-08-20T09:00:00Z' });
      const { pendingId, messages } = await seedClarificationBundle(kandev, {
        sessionId,
        turnId: turn.id,
        statuses: ['pending', 'pending'],
        createdAt: '2026-08-20T10:00:05Z',
      });
      await canonical.knex('task_session_messages').where({ id: messages[1]!.id }).update({ created_at: '2026-08-20T10:00:04.000000000Z' });
      const page = await listUnresolvedClarificationBundles(kandev, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => [b.pendingId, b.createdAt])).toEqual([[pendingId, '2026-08-20T10:00:04.000000000Z']]);
    });
  });
});
