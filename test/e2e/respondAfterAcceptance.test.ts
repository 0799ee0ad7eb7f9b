import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { claimClarificationBundle } from '../../src/repository/clarifications/clarificationClaims.js';
import { findMessagesByPendingId } from '../../src/repository/clarifications/clarifications.js';
import { createDatabase } from '../../src/repository/database.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { migrateSchema } from '../../src/repository/migrate.js';
import type { ClarificationDelivery } from '../../src/services/clarifications/clarificationPorts.js';
import { createClarificationStore } from '../../src/repository/clarifications/clarificationStore.js';
import { createClarificationService } from '../../src/services/clarifications/clarificationService.js';
import type { TestDatabase } from '../support/databases.js';
import { openSchemaDatabase, rowWriter, SCHEMA_KINDS, serviceContext, type RowWriter } from '../support/rowWriters.js';

// A database fault exactly between the bus accepting the resume and finalisation. SQLite lets a
// second connection hold the write lock deterministically; the rule under test (an accepted
// response is never sent again) does not depend on the dialect. Beside Kandev's schema the rows are
// Kandev's, and the service runs on the context it builds there.
for (const schema of SCHEMA_KINDS)
  describe(`a response accepted by the bus whose finalisation fails${schema === 'owned' ? '' : ", beside Kandev's schema"}`, () => {
    let t: TestDatabase;
    let ctx: RepositoryContext;
    let w: RowWriter;
    beforeAll(async () => {
      t = await openSchemaDatabase('sqlite', schema, { file: true });
      if (schema === 'kandev') await migrateSchema(t.db);
      ctx = await serviceContext(t, schema);
      w = rowWriter(schema, t.ctx);
    });
    afterAll(async () => {
      await t.close();
    });

    it('replies internal, never publishes the resume again, and after recovery a retry replays the recorded answer', async () => {
      const { sessionId } = await w.session();
      const turn = await w.startTurn(sessionId);
      const { pendingId } = await w.bundle({ sessionId, turnId: turn.id });
      const locker = createDatabase(t.url);
      let resumes = 0;
      // Our delivery port: no live waiter; the resume is accepted, and at that very moment another
      // process takes the database's write lock.
      const delivery: ClarificationDelivery = {
        deliverToLiveWaiter: async () => ({ outcome: 'no_waiter' }),
        publishResume: async () => {
          resumes++;
          await locker.knex.raw('BEGIN EXCLUSIVE');
          return { accepted: true, duplicate: false };
        },
        wasResumeAccepted: async () => resumes > 0,
      };
      const published: unknown[] = [];
      const service = createClarificationService({
        store: createClarificationStore(ctx),
        delivery,
        events: { publish: async (events) => void published.push(...events) },
        refreshSummary: async () => undefined,
        respondDeadlineMs: 1000,
        logger: silentLogger(),
      });
      const request = { pending_id: pendingId, answers: [{ question_id: 'q1', selected_options: ['a'], custom_text: '' }] };
      try {
        const reply = await service.respond(request);
        expect(reply).toMatchObject({
          ok: false,
          error: { code: 'internal', message: expect.stringMatching(/accepted \(resume\) but could not be finalised.*will not be delivered again/) },
        });
      } finally {
        await locker.knex.raw('ROLLBACK');
        await locker.destroy();
      }
      expect(resumes).toBe(1);
      const rows = await findMessagesByPendingId(ctx, pendingId);
      expect(rows[0]!.metadata).toMatchObject({ status: 'answered', response_delivery_pending: true });

      // Until recovery settles it, the outcome is in flight: a retry is refused, and nothing is resent.
      const early = await service.respond(request);
      expect(early).toMatchObject({ ok: false, error: { code: 'conflict', message: expect.stringMatching(/being delivered/) } });
      expect(resumes).toBe(1);

      // Recovery sees the accepted resume on the bus and finalises instead of reopening the question.
      await service.recoverPendingDeliveries({ minClaimAgeMs: 0 });
      const settled = await findMessagesByPendingId(ctx, pendingId);
      expect(settled[0]!.metadata.status).toBe('answered');
      expect(settled[0]!.metadata.response_delivery_pending).toBeUndefined();
      const retry = await service.respond(request);
      expect(retry).toMatchObject({ ok: true, claimed: false, status: 'answered' });
      expect(resumes).toBe(1);
    }, 60_000);

    it('defers recovery of an answered claim while the bus cannot say whether its resume was accepted', async () => {
      const { sessionId } = await w.session();
      const turn = await w.startTurn(sessionId);
      const { pendingId } = await w.bundle({ sessionId, turnId: turn.id });
      const claim = await claimClarificationBundle(ctx, pendingId, {
        status: 'answered',
        answers: new Map([['q1', { question_id: 'q1', selected_options: ['a'], custom_text: '' }]]),
      });
      expect(claim.claimed).toBe(true);
      let busUp = false;
      const service = createClarificationService({
        store: createClarificationStore(ctx),
        delivery: {
          deliverToLiveWaiter: async () => ({ outcome: 'no_waiter' }),
          publishResume: async () => ({ accepted: false, reason: 'unused' }),
          wasResumeAccepted: async () => {
            if (!busUp) throw new Error('no responders');
            return false;
          },
        },
        events: { publish: async () => undefined },
        refreshSummary: async () => undefined,
        respondDeadlineMs: 1000,
        logger: silentLogger(),
      });
      // Unknown is not "no": restoring could deliver the answer a second time.
      expect(await service.recoverPendingDeliveries({ minClaimAgeMs: 0 })).toMatchObject({ deferred: 1, restored: 0, finalized: 0 });
      expect((await findMessagesByPendingId(ctx, pendingId))[0]!.metadata).toMatchObject({ status: 'answered', response_delivery_pending: true });
      busUp = true;
      expect(await service.recoverPendingDeliveries({ minClaimAgeMs: 0 })).toMatchObject({ deferred: 0, restored: 1 });
      expect((await findMessagesByPendingId(ctx, pendingId))[0]!.metadata.status).toBe('pending');
    });
  });
