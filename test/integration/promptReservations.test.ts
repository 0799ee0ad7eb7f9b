import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { createPromptReceiptStore, type PromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import { getCurrentTurn } from '../../src/repository/turns/turns.js';
import { describeEachDialect, openSecondPool, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createManualClock, type ManualClock } from '../support/manualClock.js';
import { ownedStore, seedPlanTask, type PlanTask } from '../support/planComments.js';
import { insertQueuedReceipt } from '../support/promptReceipts.js';
import { seedClarificationBundle } from '../support/seed.js';
import { createRepositoryContext } from '../../src/repository/context.js';

const T0 = '2026-12-01T10:00:00.000000Z';
const TTL = 30_000;
const LOST = { ok: false, reason: 'reservation_lost' };

describeEachDialect('prompt receipt writes fenced by the reservation token on %s', (dialect) => {
  let t: TestDatabase;
  let time: ManualClock;
  let ctx: RepositoryContext;
  let store: PromptReceiptStore;
  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    time = createManualClock(T0);
    ctx = { ...t.ctx, clock: time.clock };
    store = createPromptReceiptStore(ctx, COMPLETE_PLAN_COMMENT_SCHEMA);
  });
  afterAll(async () => {
    await t.close();
  });

  /** Moves the manual clock `ms` past its next reading. */
  const advance = (ms: number) => time.set(new Date(Date.parse(time.peek()) + ms).toISOString());
  const receiptRow = async (id: string) => (await rawRows<Record<string, unknown>>(t.ctx, `SELECT * FROM queued_messages WHERE id = ?`, [id]))[0];
  const messageRow = async (id: string) => (await t.ctx.knex('task_session_messages').where({ id }).first()) as Record<string, unknown> | undefined;
  const sessionState = async (id: string) => String((await t.ctx.knex('task_sessions').where({ id }).first()).state);

  async function direct(task: PlanTask, content = 'direct prompt'): Promise<string> {
    const accepted = await ownedStore(ctx).acceptPrompt({ callerId: `d-${randomUUID()}`, target: { kind: 'session', sessionId: task.sessionId }, content });
    if (!accepted.ok) throw new Error(JSON.stringify(accepted));
    return accepted.receiptId;
  }
  const queued = (task: PlanTask, content?: string) => insertQueuedReceipt(ctx, { sessionId: task.sessionId, taskId: task.taskId, content });

  describe('W1 reserve', () => {
    it('takes the direct receipt before queued ones, then the queue by position, one receipt of a session at a time', async () => {
      const task = await seedPlanTask(t.ctx);
      const q1 = await queued(task);
      const q2 = await queued(task);
      const d = await direct(task);
      const first = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(first?.receipt).toMatchObject({ id: d, reservationOwner: 'A', deliveryAttempts: 1 });
      // The direct row is reserved: nothing else of the session is reservable, by anyone.
      expect(await store.reserveHead(task.sessionId, 'B', TTL)).toBeUndefined();
      expect(await store.release(d, first!.token, { retryAfterMs: 0, error: '' })).toEqual({ ok: true });
      await t.ctx.knex('queued_messages').where({ id: d }).delete();
      expect((await store.reserveHead(task.sessionId, 'A', TTL))?.receipt.id).toBe(q1);
      expect((await receiptRow(q2))!.delivery_reservation_token).toBeNull();
    });

    it('keeps FIFO behind a backed-off head: the later row waits although it is due', async () => {
      const task = await seedPlanTask(t.ctx);
      const q1 = await queued(task);
      const q2 = await queued(task);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.release(q1, r!.token, { retryAfterMs: 5_000, error: 'hook failed' })).toEqual({ ok: true });
      expect(await receiptRow(q1)).toMatchObject({ last_error: 'hook failed', delivery_reservation_token: null });
      expect(await store.reserveHead(task.sessionId, 'A', TTL)).toBeUndefined();
      // Listed (its later row is due), yet not reservable: the backed-off head blocks the session.
      expect(await store.listDispatchableSessions(1000)).toContain(task.sessionId);
      advance(6_000);
      expect((await store.reserveHead(task.sessionId, 'A', TTL))?.receipt.id).toBe(q1);
      expect((await receiptRow(q2))!.delivery_reservation_token).toBeNull();
    });

    it('a release that was not a failure does not count the reservation as an attempt', async () => {
      const task = await seedPlanTask(t.ctx);
      const q1 = await queued(task);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(r?.receipt.deliveryAttempts).toBe(1);
      await store.release(q1, r!.token, { retryAfterMs: 0, error: 'session_unavailable', countsAsAttempt: false });
      expect(Number((await receiptRow(q1))!.delivery_attempts)).toBe(0);
    });

    it('lists only sessions that can take a prompt, in pages by session id, so busy sessions never starve the rest', async () => {
      const busy = await Promise.all([1, 2, 3].map(() => seedPlanTask(t.ctx, { sessionState: 'RUNNING' })));
      const ready = await Promise.all([1, 2, 3].map(() => seedPlanTask(t.ctx)));
      for (const task of [...busy, ...ready]) await queued(task);
      const all: string[] = [];
      for (let page = await store.listDispatchableSessions(2); ; page = await store.listDispatchableSessions(2, all[all.length - 1])) {
        expect(page.length).toBeLessThanOrEqual(2);
        all.push(...page);
        if (page.length < 2) break;
      }
      expect(new Set(all).size).toBe(all.length);
      for (const task of ready) expect(all).toContain(task.sessionId);
      for (const task of busy) expect(all).not.toContain(task.sessionId);
      expect([...all].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))).toEqual(all);
      await setSessionState(t.ctx, busy[0]!.sessionId, 'IDLE');
      expect(await store.listDispatchableSessions(1000)).toContain(busy[0]!.sessionId);
    });

    it('lists a session only while it has a due, reservable receipt', async () => {
      const task = await seedPlanTask(t.ctx);
      const q1 = await queued(task);
      expect(await store.listDispatchableSessions(1000)).toContain(task.sessionId);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.listDispatchableSessions(1000)).not.toContain(task.sessionId);
      advance(TTL + 1);
      expect(await store.listDispatchableSessions(1000)).toContain(task.sessionId);
      expect(r?.receipt.id).toBe(q1);
    });

    // Two pools of one process cannot race on SQLite: better-sqlite3's busy wait blocks the thread the
    // lock holder needs. Its one writer serialises W1 anyway; PostgreSQL is where the lock matters.
    // Skipped, not left out, on SQLite: the report then shows that this race ran on PostgreSQL only.
    it.skipIf(dialect !== 'postgres')('two reservations racing on one session from two pools: exactly one wins each round', async () => {
      const second = openSecondPool(t);
      try {
        const other = createPromptReceiptStore(createRepositoryContext(second, time.clock), COMPLETE_PLAN_COMMENT_SCHEMA);
        for (let round = 0; round < 10; round++) {
          const task = await seedPlanTask(t.ctx);
          await queued(task);
          await queued(task);
          const results = await Promise.all([
            store.reserveHead(task.sessionId, 'A', TTL),
            other.reserveHead(task.sessionId, 'B', TTL),
            store.reserveHead(task.sessionId, 'A2', TTL),
            other.reserveHead(task.sessionId, 'B2', TTL),
          ]);
          expect(results.filter((r) => r !== undefined)).toHaveLength(1);
          const live = await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE session_id = ? AND delivery_reservation_token IS NOT NULL`, [task.sessionId]);
          expect(live).toHaveLength(1);
        }
      } finally {
        await second.destroy();
      }
    });
  });

  describe('takeover', () => {
    it('after the TTL a new owner takes the row with a new token; every write of the stale token matches nothing and changes nothing', async () => {
      const task = await seedPlanTask(t.ctx);
      const q1 = await queued(task, 'take me over');
      const a = await store.reserveHead(task.sessionId, 'A', TTL);
      advance(TTL + 1);
      // A's renewal after expiry fails even before anyone took over.
      expect(await store.renew(q1, a!.token, TTL)).toEqual(LOST);
      const b = await store.reserveHead(task.sessionId, 'B', TTL);
      expect(b?.receipt).toMatchObject({ id: q1, reservationOwner: 'B', deliveryAttempts: 2 });
      expect(b!.token).not.toBe(a!.token);
      const before = await receiptRow(q1);

      expect(await store.persistTranscript(q1, a!.token)).toEqual(LOST);
      expect(await store.markAttempted(q1, a!.token, { retryAfterMs: 0 })).toEqual(LOST);
      expect(await store.release(q1, a!.token, { retryAfterMs: 0, error: 'stale' })).toEqual(LOST);
      expect(await store.renew(q1, a!.token, TTL)).toEqual(LOST);
      expect(await store.settle(q1, a!.token, 'acknowledged', q1)).toEqual({ ...LOST, upgraded: undefined });
      expect(await store.checkEligibility(q1, a!.token)).toEqual(LOST);
      expect(await receiptRow(q1)).toEqual(before);
      expect(await messageRow(q1)).toBeUndefined();
      expect(await sessionState(task.sessionId)).toBe('IDLE');

      // B goes on as the owner.
      expect(await store.renew(q1, b!.token, TTL)).toEqual({ ok: true });
      expect(await store.persistTranscript(q1, b!.token)).toMatchObject({ ok: true, written: true });
    });

    it('a takeover after the transcript reuses it: no second message, no second turn', async () => {
      const task = await seedPlanTask(t.ctx);
      const q1 = await queued(task);
      const a = await store.reserveHead(task.sessionId, 'A', TTL);
      const first = await store.persistTranscript(q1, a!.token);
      expect(first).toMatchObject({ ok: true, written: true });
      advance(TTL + 1);
      const b = await store.reserveHead(task.sessionId, 'B', TTL);
      const again = await store.persistTranscript(q1, b!.token);
      expect(again).toMatchObject({ ok: true, written: false, turnId: (first as { turnId: string }).turnId });
      expect(await t.ctx.knex('task_session_messages').where({ task_session_id: task.sessionId })).toHaveLength(1);
      expect(await t.ctx.knex('task_session_turns').where({ task_session_id: task.sessionId })).toHaveLength(1);
    });
  });

  describe('W3 transcript', () => {
    it('writes a reserved turn and the user message with the receipt id, the next prompt_seq and the queue metadata; a direct receipt only reads its own', async () => {
      const task = await seedPlanTask(t.ctx);
      const d = await direct(task, 'first, direct');
      const q1 = await insertQueuedReceipt(ctx, {
        sessionId: task.sessionId,
        taskId: task.taskId,
        content: 'then queued',
        metadata: { plan_comment_refs: [{ id: 'c1', version: 2 }], plan_comment_request_fingerprint: 'fp' },
      });
      const rd = await store.reserveHead(task.sessionId, 'A', TTL);
      const td = await store.persistTranscript(d, rd!.token);
      expect(td).toMatchObject({ ok: true, written: false, promptSeq: 1, message: { id: d, content: 'first, direct' } });
      await store.release(d, rd!.token, { retryAfterMs: 0, error: '' });
      await t.ctx.knex('queued_messages').where({ id: d }).delete();

      const rq = await store.reserveHead(task.sessionId, 'A', TTL);
      const tq = await store.persistTranscript(q1, rq!.token);
      expect(tq).toMatchObject({ ok: true, written: true, promptSeq: 2, message: { id: q1, authorType: 'user', content: 'then queued' } });
      const message = await messageRow(q1);
      expect(JSON.parse(String(message!.metadata))).toMatchObject({
        client_message_id: q1,
        queue_id: q1,
        delivery_kind: 'queued',
        plan_comment_refs: [{ id: 'c1', version: 2 }],
        plan_comment_request_fingerprint: 'fp',
      });
      expect(Number(message!.prompt_seq)).toBe(2);
      const turn = await t.ctx
        .knex('task_session_turns')
        .where({ id: (tq as { turnId: string }).turnId })
        .first();
      expect(JSON.parse(String(turn.metadata))).toEqual({ prompt_dispatch_pending: true });
      expect(await receiptRow(q1)).toMatchObject({ durable_transcript_message_id: q1, durable_transcript_turn_id: turn.id });
      // The message is evidence: the reserved turn is the session's current turn.
      expect((await getCurrentTurn(t.ctx, task.sessionId))?.id).toBe(turn.id);
    });
  });

  describe('W4 marker', () => {
    async function reservedWithTranscript(task: PlanTask) {
      const id = await queued(task);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      const tr = await store.persistTranscript(id, r!.token);
      return { id, token: r!.token, turnId: (tr as { turnId: string }).turnId };
    }

    it('claims the session RUNNING, marks the receipt attempted and the turn prompt_dispatch_attempted; an attempted receipt is never reserved again', async () => {
      const task = await seedPlanTask(t.ctx, { sessionState: 'WAITING_FOR_INPUT' });
      const { id, token, turnId } = await reservedWithTranscript(task);
      const mark = await store.markAttempted(id, token, { retryAfterMs: 1000 });
      expect(mark).toMatchObject({ ok: true, previousState: 'WAITING_FOR_INPUT', passthrough: false, receipt: { id } });
      expect((await receiptRow(id))!.delivery_attempted_at).not.toBeNull();
      expect(await sessionState(task.sessionId)).toBe('RUNNING');
      const turn = await t.ctx.knex('task_session_turns').where({ id: turnId }).first();
      expect(JSON.parse(String(turn.metadata))).toEqual({ prompt_dispatch_pending: true, prompt_dispatch_attempted: true });
      await setSessionState(t.ctx, task.sessionId, 'IDLE');
      await queued(task);
      advance(TTL + 1);
      // Attempted and expired: still nobody's to reserve (reconciliation removes it), and it blocks the session.
      expect(await store.reserveHead(task.sessionId, 'B', TTL)).toBeUndefined();
      expect(await store.markAttempted(id, token, { retryAfterMs: 0 })).toEqual(LOST);
    });

    it('refuses an archived task, a busy session and a live clarification by releasing (uncounted); a detached clarification does not block', async () => {
      const task = await seedPlanTask(t.ctx);
      const { id, token } = await reservedWithTranscript(task);

      await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: t.ctx.clock() });
      expect(await store.markAttempted(id, token, { retryAfterMs: 0 })).toEqual({ ok: false, reason: 'task_inactive' });
      expect(await receiptRow(id)).toMatchObject({ delivery_attempted_at: null, delivery_reservation_token: null, last_error: 'task_inactive' });
      await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: null });

      await setSessionState(t.ctx, task.sessionId, 'RUNNING');
      const r2 = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.checkEligibility(id, r2!.token)).toEqual({ ok: false, reason: 'session_unavailable', state: 'RUNNING' });
      expect(await store.markAttempted(id, r2!.token, { retryAfterMs: 0 })).toEqual({ ok: false, reason: 'session_unavailable', state: 'RUNNING' });
      await setSessionState(t.ctx, task.sessionId, 'WAITING_FOR_INPUT');

      // A live question on the current turn (the reserved prompt turn, which the transcript made current).
      const current = await getCurrentTurn(t.ctx, task.sessionId);
      const bundle = await seedClarificationBundle(ctx, { sessionId: task.sessionId, turnId: current!.id });
      const r3 = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.markAttempted(id, r3!.token, { retryAfterMs: 0 })).toEqual({ ok: false, reason: 'live_clarification' });
      expect(await sessionState(task.sessionId)).toBe('WAITING_FOR_INPUT');
      // Three reservations, each released as not eligible: none counted.
      expect(Number((await receiptRow(id))!.delivery_attempts)).toBe(0);

      for (const m of bundle.messages) {
        await t.ctx
          .knex('task_session_messages')
          .where({ id: m.id })
          .update({ metadata: JSON.stringify({ ...m.metadata, agent_disconnected: true }) });
      }
      const r4 = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.markAttempted(id, r4!.token, { retryAfterMs: 0 })).toMatchObject({ ok: true });
    });

    it('a direct receipt is not held back by a live clarification (it was accepted against the session as it was)', async () => {
      const task = await seedPlanTask(t.ctx, { sessionState: 'WAITING_FOR_INPUT' });
      const d = await direct(task);
      const turn = await getCurrentTurn(t.ctx, task.sessionId);
      await seedClarificationBundle(ctx, { sessionId: task.sessionId, turnId: turn!.id });
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.markAttempted(d, r!.token, { retryAfterMs: 0 })).toMatchObject({ ok: true });
    });
  });

  describe('W6 settle and R33 removal', () => {
    async function attempted(task: PlanTask) {
      const id = await queued(task);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      const tr = await store.persistTranscript(id, r!.token);
      await store.markAttempted(id, r!.token, { retryAfterMs: 0 });
      return { id, token: r!.token, turnId: (tr as { turnId: string }).turnId };
    }
    const label = async (id: string) => JSON.parse(String((await messageRow(id))!.metadata)).prompt_delivery as string | undefined;
    const turnMeta = async (id: string) =>
      JSON.parse(String((await t.ctx.knex('task_session_turns').where({ id }).first()).metadata)) as Record<string, unknown>;

    it('deletes the receipt, labels the transcript and clears the turn dispatch keys; a second settle by the same token matches nothing', async () => {
      const task = await seedPlanTask(t.ctx);
      const { id, token, turnId } = await attempted(task);
      const settled = await store.settle(id, token, 'acknowledged', id);
      expect(settled).toMatchObject({ ok: true, receipt: { id }, message: { id } });
      expect(await receiptRow(id)).toBeUndefined();
      expect(await label(id)).toBe('acknowledged');
      expect(await turnMeta(turnId)).toEqual({});
      expect(await store.settle(id, token, 'unconfirmed', id)).toEqual({ ...LOST, upgraded: undefined });
      expect(await label(id)).toBe('acknowledged');
    });

    it("an attempted receipt is not settled by another owner's token: reservation_lost, and the row, its transcript and its turn are unchanged", async () => {
      const task = await seedPlanTask(t.ctx);
      const id = await queued(task);
      // A held the row before and gave it back (a failure before the marker); B then reserved and marked it.
      const a = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.release(id, a!.token, { retryAfterMs: 0, error: 'publish failed' })).toEqual({ ok: true });
      const b = await store.reserveHead(task.sessionId, 'B', TTL);
      const tr = await store.persistTranscript(id, b!.token);
      expect(await store.markAttempted(id, b!.token, { retryAfterMs: 0 })).toMatchObject({ ok: true });
      const turnId = (tr as { turnId: string }).turnId;
      const before = { receipt: await receiptRow(id), message: await messageRow(id), turn: await turnMeta(turnId) };
      expect(before.receipt).toMatchObject({ delivery_reservation_token: b!.token, delivery_reservation_owner: 'B' });
      expect(before.receipt!.delivery_attempted_at).not.toBeNull();

      for (const label of ['acknowledged', 'unconfirmed'] as const) {
        expect(await store.settle(id, a!.token, label, id)).toEqual({ ...LOST, upgraded: undefined });
        expect(await store.settle(id, randomUUID(), label, id)).toEqual({ ...LOST, upgraded: undefined });
      }
      expect({ receipt: await receiptRow(id), message: await messageRow(id), turn: await turnMeta(turnId) }).toEqual(before);

      // The fence let nothing through that its owner then lacks: B still settles it.
      expect(await store.settle(id, b!.token, 'acknowledged', id)).toMatchObject({ ok: true, receipt: { id } });
      expect(await label(id)).toBe('acknowledged');
    });

    it('an unattempted receipt cannot be settled', async () => {
      const task = await seedPlanTask(t.ctx);
      const id = await queued(task);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(await store.settle(id, r!.token, 'acknowledged', id)).toEqual({ ...LOST, upgraded: undefined });
      expect(await receiptRow(id)).toBeDefined();
    });

    it('reconciliation leaves a live owner alone, removes an expired attempt without dispatch; a late settle only upgrades unconfirmed to acknowledged', async () => {
      const task = await seedPlanTask(t.ctx);
      const { id, token, turnId } = await attempted(task);
      const classOf = async (rid: string) => (await store.listReconcilable()).find((r) => r.receipt.id === rid)?.action;
      expect(await classOf(id)).toBe('defer');
      expect(await store.removeAttempted(id, 'unconfirmed')).toBeUndefined();
      advance(TTL + 1);
      expect(await classOf(id)).toBe('remove');
      const removed = await store.removeAttempted(id, 'unconfirmed');
      expect(removed).toMatchObject({ receipt: { id }, message: { id } });
      expect(await receiptRow(id)).toBeUndefined();
      expect(await label(id)).toBe('unconfirmed');
      expect(await turnMeta(turnId)).toEqual({});
      // The owner comes back with a PubAck it had: the label may only go up.
      expect(await store.settle(id, token, 'unconfirmed', id)).toEqual({ ...LOST, upgraded: undefined });
      const late = await store.settle(id, token, 'acknowledged', id);
      expect(late).toMatchObject({ ok: false, reason: 'reservation_lost', upgraded: { id } });
      expect(await label(id)).toBe('acknowledged');
    });

    it('classifies waiting, expired-unattempted and orphaned receipts, and clears only a dead token', async () => {
      const task = await seedPlanTask(t.ctx);
      const waiting = await queued(task);
      const orphanTask = await seedPlanTask(t.ctx);
      const orphan = await queued(orphanTask);
      const r = await store.reserveHead(task.sessionId, 'A', TTL);
      expect(r?.receipt.id).toBe(waiting);
      const classOf = async (rid: string) => (await store.listReconcilable()).find((x) => x.receipt.id === rid)?.action;
      expect(await classOf(waiting)).toBe('defer');
      expect(await store.clearExpiredReservation(waiting, r!.token)).toBe(false);
      advance(TTL + 1);
      expect(await classOf(waiting)).toBe('resume');
      expect(await store.clearExpiredReservation(waiting, 'another-token')).toBe(false);
      expect(await store.clearExpiredReservation(waiting, r!.token)).toBe(true);
      expect(await receiptRow(waiting)).toMatchObject({ delivery_reservation_token: null, delivery_reservation_owner: null });
      expect((await store.queueStatus(task.sessionId)).entries.length).toBe(1);

      await t.ctx.knex('task_plans').where({ task_id: orphanTask.taskId }).delete();
      await t.ctx.knex('task_sessions').where({ task_id: orphanTask.taskId }).delete();
      await t.ctx.knex('tasks').where({ id: orphanTask.taskId }).delete();
      expect(await classOf(orphan)).toBe('orphan');
      expect(await store.removeOrphan(orphan)).toBe(true);
      expect(await receiptRow(orphan)).toBeUndefined();
    });
  });
});
