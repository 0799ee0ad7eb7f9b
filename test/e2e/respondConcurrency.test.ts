import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { findMessagesByPendingId } from '../../src/repository/clarifications/clarifications.js';
import type { RespondReply } from '../../src/contract/replies.js';
import { isAvailable, type TestDatabase } from '../support/databases.js';
import { startFakeAgent } from '../support/fakeAgent.js';
import { connectTestNats, deleteTopology, natsUrl, uniquePrefix } from '../support/nats.js';
import { openSchemaDatabase, rowWriter, SCHEMA_KINDS, serviceContext } from '../support/rowWriters.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const answers = (option: string) => [
  { question_id: 'q1', selected_options: [option], custom_text: '' },
  { question_id: 'q2', selected_options: [option], custom_text: '' },
];

// Beside Kandev's schema the rows are Kandev's, read through the context the service builds there.
for (const schema of SCHEMA_KINDS)
  describe.skipIf(!isAvailable('postgres'))(
    `concurrent responds from two worker processes on PostgreSQL${schema === 'owned' ? '' : ", beside Kandev's schema"}`,
    () => {
      let t: TestDatabase;
      let nc: NatsConnection;
      let prefix: string;
      const workers: WorkerProcess[] = [];

      beforeAll(async () => {
        t = await openSchemaDatabase('postgres', schema);
        nc = await connectTestNats();
        prefix = uniquePrefix('respond_race');
        const env = { DATABASE_URL: t.url, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, BOOT_RECONCILE: 'false', RESPOND_DEADLINE_MS: '5000' };
        // One after the other: both would otherwise race to create the same streams.
        workers.push(await spawnWorker(env));
        workers.push(await spawnWorker(env));
      });
      afterAll(async () => {
        for (const w of workers) await w.stop();
        await deleteTopology(nc, prefix);
        await nc?.drain();
        await t?.close();
      });

      it('50 concurrent responds: exactly one claims, exactly one delivery, the rest conflict or replay the winner', async () => {
        const w = rowWriter(schema, t.ctx);
        const { sessionId } = await w.session();
        const turn = await w.startTurn(sessionId);
        const { pendingId } = await w.bundle({ sessionId, turnId: turn.id, statuses: ['pending', 'pending'] });
        // The agent takes a moment to confirm, so most losers arrive while the winner is still delivering.
        const agent = startFakeAgent(nc, prefix, sessionId, { delayMs: 300 });
        const client = createPendingProjectorClient(nc, { prefix, respondTimeoutMs: 30_000 });
        try {
          const replies = await Promise.all(
            Array.from({ length: 50 }, (_, i) => client.respond({ pending_id: pendingId, answers: answers(i % 2 === 0 ? 'a' : 'b') })),
          );
          const winners = replies.filter((r) => r.ok && r.claimed);
          expect(winners).toHaveLength(1);
          const winner = winners[0] as Extract<RespondReply, { ok: true }>;
          expect(winner.delivery).toBe('live');
          const isReplayOfWinner = (r: RespondReply) => r.ok && !r.claimed && JSON.stringify(r.answers) === JSON.stringify(winner.answers);
          const isConflict = (r: RespondReply) => !r.ok && r.error.code === 'conflict';
          const others = replies.filter((r) => r !== winner);
          expect(others.filter((r) => !isReplayOfWinner(r) && !isConflict(r))).toEqual([]);
          expect(agent.deliveries).toHaveLength(1);

          // Retries after the winner settled replay its outcome, whichever worker serves them.
          const retries = await Promise.all(Array.from({ length: 6 }, () => client.respond({ pending_id: pendingId, answers: winner.answers })));
          expect(retries.every(isReplayOfWinner)).toBe(true);
          expect(agent.deliveries).toHaveLength(1);
          const rows = await findMessagesByPendingId(await serviceContext(t, schema), pendingId);
          expect(rows.map((r) => [r.metadata.status, r.metadata.response_delivery_pending])).toEqual([
            ['answered', undefined],
            ['answered', undefined],
          ]);
        } finally {
          agent.stop();
        }
      });
    },
  );
