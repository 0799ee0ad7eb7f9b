import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { deleteMessage } from '../support/messages.js';
import { getPendingActionsBySessionIds, loadTaskPendingState, loadTaskPendingStates } from '../../src/repository/projection/pendingActions.js';
import { createTask, setSessionState } from '../../src/repository/tasks/tasks.js';
import { completeTurn, patchTurnMetadata, startTurn } from '../../src/repository/turns/turns.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';
import type { PendingAction } from '../../src/turns/pendingAction.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

const T0 = '2026-08-20T10:00:00.000000Z';
const at = (offsetMs: number): string => toCanonicalTimestamp(new Date(Date.parse(T0) + offsetMs));

async function seedPermission(ctx: RepositoryContext, sessionId: string, turnId: string, createdAt: string, status?: string): Promise<string> {
  const metadata: Record<string, unknown> = { pending_id: `perm-${createdAt}`, tool_call_id: 'tc', options: [], action_type: 'exec' };
  if (status !== undefined) metadata.status = status;
  const message = await createMessage(ctx, { sessionId, turnId, type: 'permission_request', content: 'allow?', metadata, createdAt });
  return message.id;
}

async function pendingOf(ctx: RepositoryContext, sessionId: string): Promise<PendingAction | undefined> {
  return (await getPendingActionsBySessionIds(ctx, [sessionId])).get(sessionId);
}

describeEachDialect('pending actions on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  describe('per session', () => {
    it('reports clarification over permission within one session, whichever came first', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      for (const permissionFirst of [true, false]) {
        const { sessionId } = await seedSession(ctx);
        const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
        if (permissionFirst) await seedPermission(ctx, sessionId, turn.id, at(1_000), 'pending');
        await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, createdAt: at(2_000) });
        if (!permissionFirst) await seedPermission(ctx, sessionId, turn.id, at(3_000), 'pending');
        expect(await pendingOf(ctx, sessionId)).toBe('clarification');
      }
    });

    it('reports permission for a pending permission request and treats a missing status as pending', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      for (const status of ['pending', undefined, '']) {
        const { sessionId } = await seedSession(ctx);
        const turn = await startTurn(ctx, sessionId);
        await seedPermission(ctx, sessionId, turn.id, at(1_000), status);
        expect(await pendingOf(ctx, sessionId)).toBe('permission');
      }
    });

    it('counts only the newest permission row of the current turn: a stale pending row followed by a resolved one is none', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedPermission(ctx, sessionId, turn.id, at(1_000), 'pending');
      await seedPermission(ctx, sessionId, turn.id, at(2_000), 'approved');
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();

      await seedPermission(ctx, sessionId, turn.id, at(3_000), 'pending');
      expect(await pendingOf(ctx, sessionId)).toBe('permission');
    });

    it('breaks a created_at tie between permission rows by the greater message id on both dialects', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const tie = at(1_000);
      await createMessage(ctx, {
        id: `b-${sessionId}`,
        sessionId,
        turnId: turn.id,
        type: 'permission_request',
        content: '',
        metadata: { status: 'rejected' },
        createdAt: tie,
      });
      await createMessage(ctx, {
        id: `a-${sessionId}`,
        sessionId,
        turnId: turn.id,
        type: 'permission_request',
        content: '',
        metadata: { status: 'pending' },
        createdAt: tie,
      });
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();

      const other = await seedSession(ctx);
      const otherTurn = await startTurn(ctx, other.sessionId);
      await createMessage(ctx, {
        id: `b-${other.sessionId}`,
        sessionId: other.sessionId,
        turnId: otherTurn.id,
        type: 'permission_request',
        content: '',
        metadata: { status: 'pending' },
        createdAt: tie,
      });
      await createMessage(ctx, {
        id: `a-${other.sessionId}`,
        sessionId: other.sessionId,
        turnId: otherTurn.id,
        type: 'permission_request',
        content: '',
        metadata: { status: 'rejected' },
        createdAt: tie,
      });
      expect(await pendingOf(ctx, other.sessionId)).toBe('permission');
    });

    it('ignores a pending permission on a superseded turn', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      await seedPermission(ctx, sessionId, old.id, at(1_000), 'pending');
      await completeTurn(ctx, old.id, at(2_000));
      expect(await pendingOf(ctx, sessionId)).toBe('permission');
      await startTurn(ctx, sessionId, { startedAt: at(3_000) });
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();
    });

    it.each(['COMPLETED', 'FAILED', 'CANCELLED'])('reports nothing for a %s session even with pending rows on its current turn', async (state) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      await seedPermission(ctx, sessionId, turn.id, at(5_000), 'pending');
      expect(await pendingOf(ctx, sessionId)).toBe('clarification');
      await setSessionState(ctx, sessionId, state);
      expect(await getPendingActionsBySessionIds(ctx, [sessionId])).toEqual(new Map());
    });

    it('answers an empty map for no sessions and leaves unknown session ids out', async () => {
      expect(await getPendingActionsBySessionIds(t.ctx, [])).toEqual(new Map());
      expect(await getPendingActionsBySessionIds(t.ctx, ['no-such-session'])).toEqual(new Map());
    });

    it('does not count a detached question less: it stays a pending clarification while its turn is current', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, metadata: { agent_disconnected: true } });
      expect(await pendingOf(ctx, sessionId)).toBe('clarification');
    });

    it('never reactivates an older permission or bundle when the newer turn’s only message is deleted', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      await seedClarificationBundle(ctx, { sessionId, turnId: old.id });
      await seedPermission(ctx, sessionId, old.id, at(1_000), 'pending');
      await completeTurn(ctx, old.id, at(2_000));
      const newer = await startTurn(ctx, sessionId, { startedAt: at(3_000) });
      const only = await createMessage(ctx, { sessionId, turnId: newer.id, authorType: 'user', content: 'carry on' });
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();

      expect(await deleteMessage(ctx, only.id)).toBe(true);
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();
    });
  });

  describe('reservation turns', () => {
    it.each([true, 1, 'true', '1'])('lets an empty prompt_dispatch_pending=%j reservation leave the previous turn current', async (flag) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      await startTurn(ctx, sessionId, { startedAt: at(5_000), metadata: { prompt_dispatch_pending: flag } });
      expect(await pendingOf(ctx, sessionId)).toBe('clarification');
    });

    it.each([false, 0, 'false', '0', 'yes', null])('treats prompt_dispatch_pending=%j as no reservation, so the empty turn supersedes', async (flag) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      await startTurn(ctx, sessionId, { startedAt: at(5_000), metadata: { prompt_dispatch_pending: flag } });
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();
    });

    it('lets a reservation supersede once a message lands on it', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      const reservation = await startTurn(ctx, sessionId, { startedAt: at(5_000), metadata: { prompt_dispatch_pending: true } });
      expect(await pendingOf(ctx, sessionId)).toBe('clarification');
      await createMessage(ctx, { sessionId, turnId: reservation.id, authorType: 'user', content: 'the answer prompt' });
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();
    });

    it('lets an attempted reservation supersede even with no message', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId, { startedAt: at(0) });
      await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      const reservation = await startTurn(ctx, sessionId, { startedAt: at(5_000), metadata: { prompt_dispatch_pending: true } });
      expect(await patchTurnMetadata(ctx, reservation.id, { prompt_dispatch_attempted: true })).toBe(true);
      expect(await pendingOf(ctx, sessionId)).toBeUndefined();
    });
  });

  describe('task-level pending state', () => {
    async function addSession(ctx: RepositoryContext, taskId: string, state: string, action: PendingAction | null): Promise<string> {
      const { sessionId } = await seedSession(ctx, { taskId, state: 'RUNNING', isPrimary: false });
      const turn = await startTurn(ctx, sessionId);
      if (action === 'clarification') await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
      if (action === 'permission') await seedPermission(ctx, sessionId, turn.id, ctx.clock(), 'pending');
      await setSessionState(ctx, sessionId, state);
      return sessionId;
    }

    it('prefers a permission in one input-capable session over a clarification in another', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const task = await createTask(ctx, { workspaceId: `ws-${T0}` });
      const running = await addSession(ctx, task.id, 'RUNNING', 'clarification');
      const waiting = await addSession(ctx, task.id, 'WAITING_FOR_INPUT', 'permission');

      const state = await loadTaskPendingState(ctx, task.id);
      expect(state?.pendingAction).toBe('permission');
      expect(new Map(state?.sessions.map((s) => [s.sessionId, s.pendingAction]))).toEqual(
        new Map([
          [running, 'clarification'],
          [waiting, 'permission'],
        ]),
      );
    });

    it('ignores the pending rows of IDLE and other sessions that cannot take input', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const task = await createTask(ctx, { workspaceId: 'ws-idle' });
      const running = await addSession(ctx, task.id, 'RUNNING', 'clarification');
      const idle = await addSession(ctx, task.id, 'IDLE', 'permission');
      const created = await addSession(ctx, task.id, 'CREATED', 'permission');

      const state = await loadTaskPendingState(ctx, task.id);
      expect(state?.pendingAction).toBe('clarification');
      const bySession = new Map(state?.sessions.map((s) => [s.sessionId, s.pendingAction]));
      expect(bySession.get(running)).toBe('clarification');
      expect(bySession.get(idle)).toBeNull();
      expect(bySession.get(created)).toBeNull();
      // The IDLE session's own row is still pending; only the task-level rule leaves it out.
      expect(await pendingOf(ctx, idle)).toBe('permission');
    });

    it('reports none for a task whose only pending session is IDLE, and keeps a task with no sessions', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const task = await createTask(ctx, { workspaceId: 'ws-idle-only' });
      await addSession(ctx, task.id, 'IDLE', 'clarification');
      const empty = await createTask(ctx, { workspaceId: 'ws-empty' });

      const states = await loadTaskPendingStates(ctx, [task.id, empty.id, 'no-such-task']);
      expect(states.get(task.id)?.pendingAction).toBeNull();
      expect(states.get(empty.id)).toEqual({ taskId: empty.id, workspaceId: 'ws-empty', sessions: [], pendingAction: null });
      expect(states.has('no-such-task')).toBe(false);
    });
  });

  describe('batches', () => {
    it('gives the same map for 50 sessions in one call as for each session alone', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const sessionIds: string[] = [];
      const taskIds: string[] = [];
      for (let i = 0; i < 50; i += 1) {
        const { sessionId, taskId } = await seedSession(ctx, { workspaceId: 'ws-batch' });
        sessionIds.push(sessionId);
        taskIds.push(taskId);
        time.set(at(i * 10_000));
        const turn = await startTurn(ctx, sessionId);
        switch (i % 7) {
          case 0:
            await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
            break;
          case 1:
            await seedPermission(ctx, sessionId, turn.id, ctx.clock(), 'pending');
            break;
          case 2:
            await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
            await seedPermission(ctx, sessionId, turn.id, ctx.clock(), 'pending');
            break;
          case 3: // superseded bundle
            await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
            await startTurn(ctx, sessionId);
            break;
          case 4: // terminal session
            await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
            await setSessionState(ctx, sessionId, 'FAILED');
            break;
          case 5: // stale permission followed by a resolved one
            await seedPermission(ctx, sessionId, turn.id, ctx.clock(), 'pending');
            await seedPermission(ctx, sessionId, turn.id, ctx.clock(), 'approved');
            break;
          default: // a lifecycle turn after the real turn must not shadow it
            await seedClarificationBundle(ctx, { sessionId, turnId: turn.id });
            await createMessage(ctx, { sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
            await seedTurnAt(ctx, sessionId, { startedAt: at(i * 10_000 + 5_000), completedAt: at(i * 10_000 + 5_000), metadata: { lifecycle_only: '1' } });
        }
      }

      const batched = await getPendingActionsBySessionIds(ctx, sessionIds);
      const oneByOne = new Map<string, PendingAction>();
      for (const id of sessionIds) {
        const action = await pendingOf(ctx, id);
        if (action !== undefined) oneByOne.set(id, action);
      }
      expect(batched).toEqual(oneByOne);
      const counts = { clarification: 0, permission: 0 };
      for (const action of batched.values()) counts[action] += 1;
      // 8 + 7 + 7 clarification sessions (cases 0, 2, 6) and 7 permission sessions (case 1).
      expect(counts).toEqual({ clarification: 22, permission: 7 });

      const tasksBatched = await loadTaskPendingStates(ctx, taskIds);
      for (const taskId of taskIds) {
        expect(tasksBatched.get(taskId)).toEqual(await loadTaskPendingState(ctx, taskId));
      }
    });
  });
});
