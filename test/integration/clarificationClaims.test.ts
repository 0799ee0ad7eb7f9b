import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ClaimIntegrityError,
  claimClarificationBundle,
  finalizeClarificationDelivery,
  listPendingDeliveries,
  restoreClaimedClarifications,
  type ClaimOutcome,
} from '../../src/repository/clarifications/clarificationClaims.js';
import {
  detachActiveClarifications,
  expireActiveClarificationBundle,
  findActiveClarificationMessages,
} from '../../src/repository/clarifications/clarifications.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { getMessages, setMessageMetadataText } from '../support/messages.js';
import type { MessageRecord } from '../../src/repository/rowMapping.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import { completeTurn, startTurn } from '../../src/repository/turns/turns.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedClarificationBundle, seedSession } from '../support/seed.js';

const T0 = '2026-08-22T12:00:00.000000Z';
const at = (offsetMs: number): string => toCanonicalTimestamp(new Date(Date.parse(T0) + offsetMs));

const answer = (...questionIds: string[]): ClaimOutcome => ({
  status: 'answered',
  answers: new Map(questionIds.map((id) => [id, { question_id: id, selected_options: ['b'], custom_text: `because ${id}` }])),
});

async function reread(ctx: RepositoryContext, messages: readonly MessageRecord[]): Promise<MessageRecord[]> {
  return getMessages(
    ctx,
    messages.map((m) => m.id),
  );
}

const statuses = (rows: readonly MessageRecord[]) => rows.map((r) => r.metadata.status);

describeEachDialect('clarification claims on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  async function currentBundle(ctx: RepositoryContext, questionStatuses: Array<string | undefined> = ['pending'], metadata?: Record<string, unknown>) {
    const seeded = await seedSession(ctx);
    const turn = await startTurn(ctx, seeded.sessionId, { startedAt: at(0) });
    const bundle = await seedClarificationBundle(ctx, { sessionId: seeded.sessionId, turnId: turn.id, statuses: questionStatuses, metadata });
    return { ...seeded, turnId: turn.id, ...bundle };
  }

  describe('claiming', () => {
    it('claims a current-turn bundle once, recording each answer with the delivery marker at the repository clock', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx, ['pending', undefined]);
      time.set(at(60_000));
      const result = await claimClarificationBundle(ctx, pendingId, answer('q1', 'q2'));

      expect(result.claimed).toBe(true);
      const stored = await reread(ctx, messages);
      expect(stored.map((r) => [r.metadata.status, r.metadata.response_delivery_pending, r.metadata.response])).toEqual([
        ['answered', true, { question_id: 'q1', selected_options: ['b'], custom_text: 'because q1' }],
        ['answered', true, { question_id: 'q2', selected_options: ['b'], custom_text: 'because q2' }],
      ]);
      for (const row of stored) expect(row.updatedAt >= at(60_000) && row.updatedAt < at(60_001)).toBe(true);
      if (result.claimed) expect(result.rows.map((r) => r.id)).toEqual(stored.map((r) => r.id));

      expect(await claimClarificationBundle(ctx, pendingId, answer('q1', 'q2'))).toEqual({ claimed: false, reason: 'NOT_CLAIMABLE' });
      expect(await reread(ctx, messages)).toEqual(stored);
    });

    it('records a rejection with its reason and no response', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx, ['pending', 'pending']);
      expect((await claimClarificationBundle(ctx, pendingId, { status: 'rejected', reason: 'not now' })).claimed).toBe(true);
      const stored = await reread(ctx, messages);
      expect(stored.map((r) => [r.metadata.status, r.metadata.reject_reason, r.metadata.response])).toEqual([
        ['rejected', 'not now', undefined],
        ['rejected', 'not now', undefined],
      ]);
    });

    it('rolls the whole claim back when an answer for one question is missing', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx, ['pending', 'pending']);
      const before = await reread(ctx, messages);
      await expect(claimClarificationBundle(ctx, pendingId, answer('q1'))).rejects.toBeInstanceOf(ClaimIntegrityError);
      expect(await reread(ctx, messages)).toEqual(before);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1', 'q2'))).claimed).toBe(true);
    });

    it('lets exactly one of 20 concurrent claims win', async () => {
      // On PostgreSQL the claims race on the pool's separate connections; SQLite serialises them on its one writer.
      const { pendingId, messages } = await currentBundle(t.ctx, ['pending', 'pending']);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          claimClarificationBundle(t.ctx, pendingId, {
            status: 'answered',
            answers: new Map(['q1', 'q2'].map((q) => [q, { question_id: q, selected_options: ['a'], custom_text: `caller ${i}` }])),
          }),
        ),
      );
      const winners = results.flatMap((r, i) => (r.claimed ? [i] : []));
      expect(winners).toHaveLength(1);
      const stored = await reread(t.ctx, messages);
      expect(stored.map((r) => [r.metadata.status, (r.metadata.response as { custom_text: string }).custom_text])).toEqual([
        ['answered', `caller ${winners[0]}`],
        ['answered', `caller ${winners[0]}`],
      ]);
    });

    if (dialect === 'postgres') {
      it('waits for an uncommitted move to a terminal state and then refuses the claim', async () => {
        const { pendingId, sessionId, messages } = await currentBundle(t.ctx);
        const terminalWriter = await t.db.knex.transaction();
        try {
          await terminalWriter('task_sessions').where({ id: sessionId }).update({ state: 'COMPLETED' });
          let settled = false;
          const claim = claimClarificationBundle(t.ctx, pendingId, answer('q1')).finally(() => {
            settled = true;
          });
          await new Promise((resolve) => setTimeout(resolve, 300));
          // Still blocked on the session row: a claim committed now would race the terminal move.
          expect(settled).toBe(false);
          await terminalWriter.commit();
          expect(await claim).toEqual({ claimed: false, reason: 'NOT_CLAIMABLE' });
        } finally {
          if (!terminalWriter.isCompleted()) await terminalWriter.rollback();
        }
        expect(statuses(await reread(t.ctx, messages))).toEqual(['pending']);
      });
    }

    it('refuses a bundle whose turn was superseded, without writing', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, pendingId, messages } = await currentBundle(ctx);
      await completeTurn(ctx, turnId, at(1_000));
      await startTurn(ctx, sessionId, { startedAt: at(2_000) });
      const before = await reread(ctx, messages);
      expect(await claimClarificationBundle(ctx, pendingId, answer('q1'))).toEqual({ claimed: false, reason: 'NOT_CLAIMABLE' });
      expect(await reread(ctx, messages)).toEqual(before);
    });

    it.each(['COMPLETED', 'FAILED', 'CANCELLED'])('refuses a bundle in a %s session, without writing', async (state) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, pendingId, messages } = await currentBundle(ctx);
      await setSessionState(ctx, sessionId, state);
      const before = await reread(ctx, messages);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1'))).claimed).toBe(false);
      expect(await reread(ctx, messages)).toEqual(before);
    });

    it.each(['expired', 'cancelled', 'answered', 'rejected'])('refuses a bundle whose rows are all %s', async (status) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId } = await currentBundle(ctx, [status]);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1'))).claimed).toBe(false);
    });

    it('refuses an unknown pending id', async () => {
      expect(await claimClarificationBundle(t.ctx, `missing-${randomUUID()}`, answer('q1'))).toEqual({ claimed: false, reason: 'NOT_CLAIMABLE' });
    });

    it('answers a bundle whose only question id is the nested question.id, as the listing shows it', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const turn = await startTurn(ctx, sessionId);
      const pendingId = randomUUID();
      const row = await createMessage(ctx, {
        sessionId,
        turnId: turn.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: pendingId, question: { id: 'nested-1', prompt: 'Which?' } },
      });
      expect((await claimClarificationBundle(ctx, pendingId, answer('nested-1'))).claimed).toBe(true);
      expect((await reread(ctx, [row]))[0]?.metadata.response).toEqual({ question_id: 'nested-1', selected_options: ['b'], custom_text: 'because nested-1' });
    });

    it('claims a detached bundle on the current turn', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, pendingId } = await currentBundle(ctx, ['pending']);
      expect(await detachActiveClarifications(ctx, sessionId)).toHaveLength(1);
      const result = await claimClarificationBundle(ctx, pendingId, answer('q1'));
      expect(result.claimed).toBe(true);
      if (result.claimed) expect(result.rows[0]?.metadata).toMatchObject({ status: 'answered', agent_disconnected: true });
    });
  });

  describe('malformed bundles are refused whole', () => {
    it('refuses a pending_id shared by two sessions', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const first = await currentBundle(ctx);
      const other = await seedSession(ctx);
      const otherTurn = await startTurn(ctx, other.sessionId);
      const stray = await seedClarificationBundle(ctx, { sessionId: other.sessionId, turnId: otherTurn.id, pendingId: first.pendingId });
      const all = [...first.messages, ...stray.messages];
      const before = await reread(ctx, all);
      expect((await claimClarificationBundle(ctx, first.pendingId, answer('q1'))).claimed).toBe(false);
      expect(await reread(ctx, all)).toEqual(before);
    });

    it('refuses a pending_id spread over two turns of one session', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, pendingId, messages } = await currentBundle(ctx);
      await completeTurn(ctx, turnId, at(1_000));
      const newer = await startTurn(ctx, sessionId, { startedAt: at(2_000) });
      const onNewer = await createMessage(ctx, {
        sessionId,
        turnId: newer.id,
        type: 'clarification_request',
        content: '?',
        metadata: { pending_id: pendingId, question_id: 'q1', status: 'pending' },
      });
      const before = await reread(ctx, [...messages, onNewer]);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1'))).claimed).toBe(false);
      expect(await reread(ctx, [...messages, onNewer])).toEqual(before);
    });

    it('refuses a pending_id also carried by a non-clarification row', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, pendingId, messages } = await currentBundle(ctx);
      await createMessage(ctx, { sessionId, turnId, type: 'permission_request', content: 'allow?', metadata: { pending_id: pendingId } });
      const before = await reread(ctx, messages);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1'))).claimed).toBe(false);
      expect(await reread(ctx, messages)).toEqual(before);
    });
  });

  describe('mixed bundles and restore', () => {
    it('claims only the pending siblings, keeps the terminal one, and a restore reopens only the claimed rows', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx, ['answered', undefined, 'pending']);
      const earlier = { question_id: 'q1', selected_options: ['a'], custom_text: 'from an older failure' };
      const first = messages[0]!;
      await setMessageMetadataText(ctx, first.id, JSON.stringify({ ...first.metadata, response: earlier }));
      const terminalBefore = (await reread(ctx, [first]))[0];

      const claim = await claimClarificationBundle(ctx, pendingId, answer('q2', 'q3'));
      expect(claim.claimed).toBe(true);
      if (!claim.claimed) return;
      expect(claim.rows.map((r) => r.id)).toEqual([messages[1]?.id, messages[2]?.id]);
      expect((await reread(ctx, [first]))[0]).toEqual(terminalBefore);

      const restore = await restoreClaimedClarifications(
        ctx,
        pendingId,
        'answered',
        claim.rows.map((r) => r.id),
      );
      expect(restore.restored).toBe(true);
      const after = await reread(ctx, messages);
      expect(after[0]).toEqual(terminalBefore);
      for (const row of after.slice(1)) {
        expect(row.metadata.status).toBe('pending');
        expect(row.metadata).not.toHaveProperty('response');
        expect(row.metadata).not.toHaveProperty('response_delivery_pending');
      }
    });

    it('refuses to restore the terminal sibling a claim did not take', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx, ['answered', 'pending']);
      const claim = await claimClarificationBundle(ctx, pendingId, answer('q2'));
      expect(claim.claimed).toBe(true);
      const ids = messages.map((m) => m.id);
      expect(await restoreClaimedClarifications(ctx, pendingId, 'answered', ids)).toEqual({ restored: false, reason: 'NOT_RESTORABLE' });
      expect(statuses(await reread(ctx, messages))).toEqual(['answered', 'answered']);
    });

    it('allows claim, restore and claim again after a failed delivery', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx, ['pending', 'pending']);
      const first = await claimClarificationBundle(ctx, pendingId, { status: 'rejected' });
      expect(first.claimed).toBe(true);
      expect(
        (
          await restoreClaimedClarifications(
            ctx,
            pendingId,
            'rejected',
            messages.map((m) => m.id),
          )
        ).restored,
      ).toBe(true);
      expect(statuses(await reread(ctx, messages))).toEqual(['pending', 'pending']);

      const second = await claimClarificationBundle(ctx, pendingId, answer('q1', 'q2'));
      expect(second.claimed).toBe(true);
      expect(statuses(await reread(ctx, messages))).toEqual(['answered', 'answered']);
    });

    it('keeps the bundle terminal when the session turned terminal before the restore', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, pendingId, messages } = await currentBundle(ctx);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1'))).claimed).toBe(true);
      await setSessionState(ctx, sessionId, 'FAILED');
      expect(await restoreClaimedClarifications(ctx, pendingId, 'answered', [messages[0]!.id])).toEqual({ restored: false, reason: 'NOT_RESTORABLE' });
      expect((await reread(ctx, messages))[0]?.metadata).toMatchObject({ status: 'answered', response_delivery_pending: true });
    });

    it('keeps the bundle terminal when a newer turn started before the restore', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, pendingId, messages } = await currentBundle(ctx);
      expect((await claimClarificationBundle(ctx, pendingId, answer('q1'))).claimed).toBe(true);
      await completeTurn(ctx, turnId, at(1_000));
      await startTurn(ctx, sessionId, { startedAt: at(2_000) });
      expect((await restoreClaimedClarifications(ctx, pendingId, 'answered', [messages[0]!.id])).restored).toBe(false);
      expect(statuses(await reread(ctx, messages))).toEqual(['answered']);
      expect(await findActiveClarificationMessages(ctx, sessionId)).toEqual([]);
    });

    it('refuses to restore with a terminal status other than the claimed one', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx);
      await claimClarificationBundle(ctx, pendingId, answer('q1'));
      expect((await restoreClaimedClarifications(ctx, pendingId, 'rejected', [messages[0]!.id])).restored).toBe(false);
      expect(statuses(await reread(ctx, messages))).toEqual(['answered']);
    });

    it('refuses to restore once delivery was finalised', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx);
      await claimClarificationBundle(ctx, pendingId, answer('q1'));
      expect(await finalizeClarificationDelivery(ctx, [messages[0]!.id])).toHaveLength(1);
      expect((await restoreClaimedClarifications(ctx, pendingId, 'answered', [messages[0]!.id])).restored).toBe(false);
      expect(statuses(await reread(ctx, messages))).toEqual(['answered']);
    });

    it('rejects an empty or repeated list of claimed ids as a caller error', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { pendingId, messages } = await currentBundle(ctx);
      await claimClarificationBundle(ctx, pendingId, answer('q1'));
      await expect(restoreClaimedClarifications(ctx, pendingId, 'answered', [])).rejects.toBeInstanceOf(ClaimIntegrityError);
      await expect(restoreClaimedClarifications(ctx, pendingId, 'answered', [messages[0]!.id, messages[0]!.id])).rejects.toBeInstanceOf(ClaimIntegrityError);
    });
  });

  describe('detach', () => {
    it('marks only pending, not yet detached rows of the current turn, at the repository clock, and a repeat changes nothing', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const { sessionId } = await seedSession(ctx);
      const old = await startTurn(ctx, sessionId, { startedAt: at(0) });
      const oldBundle = await seedClarificationBundle(ctx, { sessionId, turnId: old.id });
      await completeTurn(ctx, old.id, at(1_000));
      const current = await startTurn(ctx, sessionId, { startedAt: at(2_000) });
      const bundle = await seedClarificationBundle(ctx, { sessionId, turnId: current.id, statuses: ['pending', 'answered', undefined] });
      const already = await seedClarificationBundle(ctx, { sessionId, turnId: current.id, metadata: { agent_disconnected: true } });
      const other = await currentBundle(ctx);
      const untouched = [...oldBundle.messages, bundle.messages[1]!, ...already.messages, ...other.messages];
      const untouchedBefore = await reread(ctx, untouched);

      time.set(at(90_000));
      const changed = await detachActiveClarifications(ctx, sessionId);
      expect(changed.map((r) => r.id)).toEqual([bundle.messages[0]?.id, bundle.messages[2]?.id]);
      for (const row of await reread(ctx, changed)) {
        expect(row.metadata.agent_disconnected).toBe(true);
        expect(row.updatedAt).toBe(at(90_000));
      }
      expect((await reread(ctx, changed)).map((r) => r.metadata.status)).toEqual(['pending', undefined]);
      expect(await reread(ctx, untouched)).toEqual(untouchedBefore);

      const afterFirst = await reread(ctx, bundle.messages);
      expect(await detachActiveClarifications(ctx, sessionId)).toEqual([]);
      expect(await reread(ctx, bundle.messages)).toEqual(afterFirst);
    });

    it.each(['true', '1', true, 1])('treats agent_disconnected=%j as already detached', async (flag) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, messages } = await currentBundle(ctx, ['pending'], { agent_disconnected: flag });
      const before = await reread(ctx, messages);
      expect(await detachActiveClarifications(ctx, sessionId)).toEqual([]);
      expect(await reread(ctx, messages)).toEqual(before);
    });

    it.each(['false', '0', false, 0, 'yes'])('detaches a row whose agent_disconnected=%j is not a truthy flag', async (flag) => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, messages } = await currentBundle(ctx, ['pending'], { agent_disconnected: flag });
      expect((await detachActiveClarifications(ctx, sessionId)).map((r) => r.id)).toEqual([messages[0]?.id]);
      expect((await reread(ctx, messages))[0]?.metadata.agent_disconnected).toBe(true);
    });
  });

  describe('expire', () => {
    it('expires only the pending rows of that pending_id on the current turn', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, pendingId, messages } = await currentBundle(ctx, ['pending', 'answered', undefined]);
      const sibling = await seedClarificationBundle(ctx, { sessionId, turnId });
      const siblingBefore = await reread(ctx, sibling.messages);
      const answeredBefore = (await reread(ctx, [messages[1]!]))[0];

      const expired = await expireActiveClarificationBundle(ctx, sessionId, pendingId);
      expect(expired.map((r) => r.id)).toEqual([messages[0]?.id, messages[2]?.id]);
      const after = await reread(ctx, messages);
      expect(after.map((r) => [r.metadata.status, r.metadata.agent_disconnected])).toEqual([
        ['expired', true],
        ['answered', undefined],
        ['expired', true],
      ]);
      expect(after[1]).toEqual(answeredBefore);
      expect(await reread(ctx, sibling.messages)).toEqual(siblingBefore);
      expect(await expireActiveClarificationBundle(ctx, sessionId, pendingId)).toEqual([]);
    });

    it('leaves a superseded bundle as it is', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, turnId, pendingId, messages } = await currentBundle(ctx);
      await completeTurn(ctx, turnId, at(1_000));
      await startTurn(ctx, sessionId, { startedAt: at(2_000) });
      const before = await reread(ctx, messages);
      expect(await expireActiveClarificationBundle(ctx, sessionId, pendingId)).toEqual([]);
      expect(await reread(ctx, messages)).toEqual(before);
    });

    it('expires a bundle of a session that has just turned terminal', async () => {
      const { ctx } = withManualClock(t.ctx, at(0));
      const { sessionId, pendingId } = await currentBundle(ctx);
      await setSessionState(ctx, sessionId, 'COMPLETED');
      expect((await expireActiveClarificationBundle(ctx, sessionId, pendingId)).map((r) => r.metadata.status)).toEqual(['expired']);
    });
  });

  describe('finalize', () => {
    it('clears response_delivery_pending only on the given rows and keeps their answer time', async () => {
      const { ctx, time } = withManualClock(t.ctx, at(0));
      const a = await currentBundle(ctx, ['pending', 'pending']);
      const b = await currentBundle(ctx, ['pending']);
      time.set(at(10_000));
      await claimClarificationBundle(ctx, a.pendingId, answer('q1', 'q2'));
      await claimClarificationBundle(ctx, b.pendingId, answer('q1'));
      const claimedA = await reread(ctx, a.messages);
      expect(await listPendingDeliveries(ctx)).toEqual(expect.arrayContaining([a.pendingId, b.pendingId]));

      time.set(at(20_000));
      const finalized = await finalizeClarificationDelivery(ctx, [a.messages[0]!.id]);
      expect(finalized.map((r) => r.id)).toEqual([a.messages[0]?.id]);
      const afterA = await reread(ctx, a.messages);
      expect(afterA[0]?.metadata).not.toHaveProperty('response_delivery_pending');
      expect(afterA[0]?.metadata.status).toBe('answered');
      expect(afterA[0]?.updatedAt).toBe(claimedA[0]?.updatedAt);
      expect(afterA[1]).toEqual(claimedA[1]);
      expect((await reread(ctx, b.messages))[0]?.metadata.response_delivery_pending).toBe(true);

      expect(await finalizeClarificationDelivery(ctx, [a.messages[1]!.id])).toHaveLength(1);
      const pending = await listPendingDeliveries(ctx);
      expect(pending).toContain(b.pendingId);
      expect(pending).not.toContain(a.pendingId);
      expect(await finalizeClarificationDelivery(ctx, [a.messages[1]!.id])).toEqual([]);
      expect(await finalizeClarificationDelivery(ctx, [])).toEqual([]);
    });
  });
});
