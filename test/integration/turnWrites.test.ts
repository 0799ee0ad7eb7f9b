import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimClarificationBundle } from '../../src/repository/clarifications/clarificationClaims.js';
import {
  detachActiveClarifications,
  findActiveClarificationMessages,
  listUnresolvedClarificationBundles,
} from '../../src/repository/clarifications/clarifications.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { getPendingActionsBySessionIds, loadTaskPendingState } from '../../src/repository/projection/pendingActions.js';
import { toTurnRecord, type TurnRecord } from '../../src/repository/rowMapping.js';
import { completeTurn, getActiveTurn, getCurrentTurn, listVisibleTurns, startTurn } from '../../src/repository/turns/turns.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';
import { createMessageRequestSchema } from '../support/createMessageRequest.js';
import { abandonOpenTurns, abandonTurn } from '../support/turnWrites.js';
import { newestDurableTurnId } from '../../src/turns/newestDurableTurnId.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

const T0 = '2026-08-20T01:40:08.937000Z';
const at = (offsetMs: number): string => toCanonicalTimestamp(new Date(Date.parse(T0) + offsetMs));

async function readTurn(ctx: RepositoryContext, turnId: string): Promise<TurnRecord> {
  const row = await ctx.knex('task_session_turns').where({ id: turnId }).first();
  if (!row) throw new Error(`turn ${turnId} not found`);
  return toTurnRecord(row);
}

async function openTurnIds(ctx: RepositoryContext, sessionId: string): Promise<string[]> {
  const rows = await ctx.knex('task_session_turns').select('id').where({ task_session_id: sessionId }).whereNull('completed_at');
  return rows.map((r: { id: string }) => r.id);
}

const answerQ1 = {
  status: 'answered' as const,
  answers: new Map([['q1', { question_id: 'q1', selected_options: ['a'], custom_text: '' }]]),
};

describeEachDialect('turn writes on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  describe('lifecycle turns from createMessage with completedTurn', () => {
    it('writes a turn born completed and marked lifecycle_only in the same insert, and parents the message on it', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const boot = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'agent boot', completedTurn: true });

      const turn = await readTurn(ctx, boot.turnId);
      expect(turn.sessionId).toBe(sessionId);
      expect(turn.metadata).toEqual({ lifecycle_only: true });
      expect(turn.completedAt).toBe(turn.startedAt);
      // No later UPDATE added the marker: the row still carries its insert-time updated_at.
      expect(turn.updatedAt).toBe(turn.createdAt);
      expect(boot.type).toBe('script_execution');
    });

    it('writes a new lifecycle turn for every retried boot message, each one marked', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const first = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
      const retry = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });

      expect(retry.turnId).not.toBe(first.turnId);
      expect((await readTurn(ctx, first.turnId)).metadata.lifecycle_only).toBe(true);
      expect((await readTurn(ctx, retry.turnId)).metadata.lifecycle_only).toBe(true);
      expect(await getCurrentTurn(ctx, sessionId)).toBeUndefined();
    });

    it('keeps lifecycle turns in the visible history with their marker, so a client resolver skips them too', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const real = await startTurn(ctx, sessionId);
      const boot = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });

      const visible = await listVisibleTurns(ctx, sessionId);
      expect(visible.map((v) => v.id)).toEqual([real.id, boot.turnId]);
      expect(visible[1]?.metadata.lifecycle_only).toBe(true);
      const clientView = visible.map((v) => ({
        id: v.id,
        started_at: v.startedAt,
        created_at: v.createdAt,
        completed_at: v.completedAt,
        metadata: v.metadata,
      }));
      expect(newestDurableTurnId(clientView)).toBe(real.id);
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(real.id);
    });
  });

  describe('spec scenarios through the write paths', () => {
    it('makes the new real turn current when it opens 3s after a resume lifecycle turn between turns (scenario 2)', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const previous = await startTurn(ctx, sessionId);
      const oldBundle = await seedClarificationBundle(ctx, { sessionId, turnId: previous.id });
      time.set(at(60_000));
      expect(await completeTurn(ctx, previous.id)).toBe(true);
      time.set(at(61_000));
      const boot = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
      time.set(at(64_000));
      const next = await startTurn(ctx, sessionId);
      const newBundle = await seedClarificationBundle(ctx, { sessionId, turnId: next.id });

      expect(boot.turnId).not.toBe(next.id);
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(next.id);
      expect((await getActiveTurn(ctx, sessionId))?.id).toBe(next.id);
      expect((await findActiveClarificationMessages(ctx, sessionId)).map((m) => m.metadata.pending_id)).toEqual([newBundle.pendingId]);
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => b.pendingId)).toEqual([newBundle.pendingId]);
      expect((await claimClarificationBundle(ctx, oldBundle.pendingId, answerQ1)).claimed).toBe(false);
      expect((await claimClarificationBundle(ctx, newBundle.pendingId, answerQ1)).claimed).toBe(true);
    });

    it('keeps an open turn current over a later, unmarked, zero-duration legacy turn (scenario 3)', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const open = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: open.id });
      const legacy = await seedTurnAt(ctx, sessionId, { startedAt: at(800), completedAt: at(800), metadata: { runtime_config_snapshot: {} } });

      expect(legacy).not.toBe(open.id);
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(open.id);
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles.map((b) => b.pendingId)).toEqual([pendingId]);
      expect((await claimClarificationBundle(ctx, pendingId, answerQ1)).claimed).toBe(true);
    });

    it('leaves the legacy unmarked turn current once the real turn has completed, so the older bundle stays superseded (scenario 4, known residual)', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const real = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: real.id });
      const legacy = await seedTurnAt(ctx, sessionId, { startedAt: at(800), completedAt: at(800) });
      time.set(at(5_000));
      expect(await completeTurn(ctx, real.id)).toBe(true);

      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(legacy);
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).has(sessionId)).toBe(false);
      expect(await findActiveClarificationMessages(ctx, sessionId)).toEqual([]);
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles).toEqual([]);
      expect((await claimClarificationBundle(ctx, pendingId, answerQ1)).claimed).toBe(false);
    });

    it('keeps a completed real turn current when a marked lifecycle turn follows it, unlike the unmarked legacy turn of scenario 4', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const real = await startTurn(ctx, sessionId);
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: real.id });
      time.set(at(5_000));
      expect(await completeTurn(ctx, real.id)).toBe(true);
      time.set(at(6_000));
      const boot = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });

      expect(boot.turnId).not.toBe(real.id);
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(real.id);
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles.map((b) => b.pendingId)).toEqual([pendingId]);
      expect((await claimClarificationBundle(ctx, pendingId, answerQ1)).claimed).toBe(true);
    });

    it('resolves no current turn for a session holding only lifecycle turns, and every consumer answers empty without error (scenario 5)', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, taskId, workspaceId } = await seedSession(ctx);
      const first = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
      await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot again', completedTurn: true });
      // A bundle that should never exist on a lifecycle turn (D5); it proves the turn is not authority.
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: first.turnId });

      expect(await getCurrentTurn(ctx, sessionId)).toBeUndefined();
      expect(await getActiveTurn(ctx, sessionId)).toBeUndefined();
      expect(await getPendingActionsBySessionIds(ctx, [sessionId])).toEqual(new Map());
      expect(await findActiveClarificationMessages(ctx, sessionId)).toEqual([]);
      expect(await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).toEqual({ bundles: [], nextCursor: null });
      expect(await claimClarificationBundle(ctx, pendingId, answerQ1)).toEqual({ claimed: false, reason: 'NOT_CLAIMABLE' });
      expect(await detachActiveClarifications(ctx, sessionId)).toEqual([]);
      const state = await loadTaskPendingState(ctx, taskId);
      expect(state?.pendingAction).toBeNull();
      expect(state?.sessions.map((s) => s.pendingAction)).toEqual([null]);
    });
  });

  describe('startTurn and completeTurn', () => {
    it('opens a conversational turn at the repository clock that is both the active and the current turn', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId, taskId } = await seedSession(ctx);
      time.set(at(1_000));
      const turn = await startTurn(ctx, sessionId, { metadata: { runtime_config_snapshot: { model: 'x' } } });

      const stored = await readTurn(ctx, turn.id);
      expect(stored).toMatchObject({ sessionId, taskId, startedAt: at(1_000), createdAt: at(1_000), completedAt: null });
      expect(stored.metadata).toEqual({ runtime_config_snapshot: { model: 'x' } });
      expect((await getActiveTurn(ctx, sessionId))?.id).toBe(turn.id);
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(turn.id);
    });

    it('completes an open turn once and refuses to overwrite the completion time of a completed turn', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      time.set(at(10_000));
      expect(await completeTurn(ctx, turn.id)).toBe(true);
      expect((await readTurn(ctx, turn.id)).completedAt).toBe(at(10_000));

      time.set(at(20_000));
      expect(await completeTurn(ctx, turn.id)).toBe(false);
      expect(await completeTurn(ctx, turn.id, at(30_000))).toBe(false);
      expect((await readTurn(ctx, turn.id)).completedAt).toBe(at(10_000));
      expect(await getActiveTurn(ctx, sessionId)).toBeUndefined();
      // A completed conversational turn still owns the session's state until a newer turn starts.
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(turn.id);
    });

    it('reports false when completing a turn that does not exist', async () => {
      expect(await completeTurn(t.ctx, 'no-such-turn')).toBe(false);
    });
  });

  describe('abandoning turns', () => {
    it('buries an open turn with completed_at = started_at and leaves it conversational and current', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      time.set(at(3_600_000));
      expect(await abandonTurn(ctx, turn.id)).toBe(true);

      const stored = await readTurn(ctx, turn.id);
      expect(stored.completedAt).toBe(at(0));
      expect(stored.completedAt).toBe(stored.startedAt);
      expect(stored.metadata.lifecycle_only).toBeUndefined();
      expect(await getActiveTurn(ctx, sessionId)).toBeUndefined();
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(turn.id);
      // Zero duration is never read as "lifecycle" (D3): its question stays operational.
      expect((await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId)).toBe('clarification');
      expect((await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 })).bundles.map((b) => b.pendingId)).toEqual([pendingId]);
    });

    it('does not re-bury a turn that already completed', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      time.set(at(5_000));
      await completeTurn(ctx, turn.id);
      expect(await abandonTurn(ctx, turn.id)).toBe(false);
      expect((await readTurn(ctx, turn.id)).completedAt).toBe(at(5_000));
    });

    it('leaves no open turn after abandonOpenTurns, even with 20 open turns', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const ids: string[] = [];
      for (let i = 0; i < 20; i += 1) ids.push((await startTurn(ctx, sessionId, { startedAt: at(i * 1_000) })).id);
      const completed = await startTurn(ctx, sessionId, { startedAt: at(-5_000) });
      await completeTurn(ctx, completed.id, at(-4_000));
      expect(await openTurnIds(ctx, sessionId)).toHaveLength(20);

      const abandoned = await abandonOpenTurns(ctx, sessionId);
      expect([...abandoned].sort()).toEqual([...ids].sort());
      expect(await openTurnIds(ctx, sessionId)).toEqual([]);
      expect(await getActiveTurn(ctx, sessionId)).toBeUndefined();
      for (const id of ids) {
        const turn = await readTurn(ctx, id);
        expect(turn.completedAt).toBe(turn.startedAt);
      }
      expect((await readTurn(ctx, completed.id)).completedAt).toBe(at(-4_000));
      expect(await abandonOpenTurns(ctx, sessionId)).toEqual([]);
    });

    it('abandons only the given session’s open turns', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const a = await seedSession(ctx);
      const b = await seedSession(ctx);
      await startTurn(ctx, a.sessionId);
      const other = await startTurn(ctx, b.sessionId);
      expect(await abandonOpenTurns(ctx, a.sessionId)).toHaveLength(1);
      expect(await openTurnIds(ctx, b.sessionId)).toEqual([other.id]);
    });
  });

  describe('two open turns (the single-open-turn invariant violated)', () => {
    it('picks the open turn with the later started_at', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const later = await seedTurnAt(ctx, sessionId, { startedAt: at(2_000), createdAt: at(0) });
      await seedTurnAt(ctx, sessionId, { startedAt: at(1_000), createdAt: at(9_000) });
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(later);
      expect((await getActiveTurn(ctx, sessionId))?.id).toBe(later);
    });

    it('falls back to the later created_at when started_at ties', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const laterCreated = await seedTurnAt(ctx, sessionId, { id: `a-${sessionId}`, startedAt: at(1_000), createdAt: at(1_500) });
      await seedTurnAt(ctx, sessionId, { id: `z-${sessionId}`, startedAt: at(1_000), createdAt: at(1_200) });
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(laterCreated);
      expect((await getActiveTurn(ctx, sessionId))?.id).toBe(laterCreated);
    });

    it('falls back to the greater id when started_at and created_at tie, whatever the insert order', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      for (const order of [
        ['b', 'a'],
        ['a', 'b'],
      ] as const) {
        const { sessionId } = await seedSession(ctx);
        for (const suffix of order) await seedTurnAt(ctx, sessionId, { id: `turn-${suffix}-${sessionId}`, startedAt: at(1_000) });
        expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(`turn-b-${sessionId}`);
        expect((await getActiveTurn(ctx, sessionId))?.id).toBe(`turn-b-${sessionId}`);
      }
    });

    it('agrees with the client resolver on ties between ids that differ only in letter case', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const ids = [`TURN-${sessionId}`, `turn-${sessionId}`, `Turn-${sessionId}`];
      for (const id of ids) await seedTurnAt(ctx, sessionId, { id, startedAt: at(1_000) });
      const visible = (await listVisibleTurns(ctx, sessionId)).map((v) => ({
        id: v.id,
        started_at: v.startedAt,
        created_at: v.createdAt,
        completed_at: v.completedAt,
        metadata: v.metadata,
      }));
      // Binary (code unit) order, as newestDurableTurnId compares: lower case sorts after upper case.
      expect(newestDurableTurnId(visible)).toBe(`turn-${sessionId}`);
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(`turn-${sessionId}`);
    });

    it('prefers an open turn over a completed turn that started later', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const open = await seedTurnAt(ctx, sessionId, { startedAt: at(0) });
      await seedTurnAt(ctx, sessionId, { startedAt: at(10_000), completedAt: at(20_000) });
      expect((await getCurrentTurn(ctx, sessionId))?.id).toBe(open);
    });
  });

  describe('the boot-on-resume path (AC-7)', () => {
    it('keeps the open turn’s turn_id on a clarification written after the resume lifecycle turn', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId, workspaceId } = await seedSession(ctx);
      const open = await startTurn(ctx, sessionId);
      time.set(at(800));
      const boot = await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
      time.set(at(3_600_000));
      // No turnId: the repository takes the open turn (getOrStartTurn), never the lifecycle turn.
      const question = await createMessage(ctx, {
        sessionId,
        type: 'clarification_request',
        authorType: 'agent',
        content: 'Which option?',
        requestsInput: true,
        metadata: { pending_id: `p-${sessionId}`, question_id: 'q1', status: 'pending' },
      });

      expect(boot.turnId).not.toBe(open.id);
      expect(question.turnId).toBe(open.id);
      expect((await readTurn(ctx, boot.turnId)).metadata.lifecycle_only).toBe(true);
      const page = await listUnresolvedClarificationBundles(ctx, { workspaceId, limit: 10 });
      expect(page.bundles.map((b) => [b.pendingId, b.turnId])).toEqual([[`p-${sessionId}`, open.id]]);
    });

    it('lands a clarification on the open turn even when its request body asks for a completed turn', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const open = await startTurn(ctx, sessionId);
      time.set(at(800));
      await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
      const body = createMessageRequestSchema.parse({
        session_id: sessionId,
        type: 'clarification_request',
        content: 'Which option?',
        completed_turn: true,
        completedTurn: true,
        metadata: { pending_id: `p-${sessionId}`, question_id: 'q1' },
      });
      // The whole parsed body is forwarded, so a key the schema let through would reach the repository.
      const message = await createMessage(ctx, {
        ...body,
        sessionId: body.session_id,
        turnId: body.turn_id,
        type: body.type,
        content: body.content,
        authorType: body.author_type,
        metadata: body.metadata,
      });

      expect(message.turnId).toBe(open.id);
      expect((await findActiveClarificationMessages(ctx, sessionId)).map((m) => m.id)).toEqual([message.id]);
    });
  });
});
