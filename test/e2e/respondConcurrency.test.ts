import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { findMessagesByPendingId } from '../../src/repository/clarifications.js';
import { startTurn } from '../../src/repository/turns.js';
import type { RespondReply } from '../../src/services/replies.js';
import { isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { startFakeAgent } from '../support/fakeAgent.js';
import { connectTestNats, deleteTopology, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedClarificationBundle, seedSession } from '../support/seed.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const answers = (option: string) => [
  { question_id: 'q1', selected_options: [option], custom_text: '' },
  { question_id: 'q2', selected_options: [option], custom_text: '' },
];

describe.skipIf(!isAvailable('postgres'))('concurrent responds from two worker processes on PostgreSQL', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    t = await openTestDatabase('postgres');
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
    const { sessionId } = await seedSession(t.ctx);
    const turn = await startTurn(t.ctx, sessionId);
    const { pendingId } = await seedClarificationBundle(t.ctx, { sessionId, turnId: turn.id, statuses: ['pending', 'pending'] });
    // The agent takes a moment to confirm, so most losers arrive while the winner is still delivering.
    const agent = startFakeAgent(nc, prefix, sessionId, { delayMs: 300 });
    const client = createPendingProjectorClient(nc, { prefix, respondTimeoutMs: 30_000 });
    try {
      const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => client.respond({ pending_id: pendingId, answers: answers(i % 2 === 0 ? 'a' : 'b') })));
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
      const rows = await findMessagesByPendingId(t.ctx, pendingId);
      expect(rows.map((r) => [r.metadata.status, r.metadata.response_delivery_pending])).toEqual([
        ['answered', undefined],
        ['answered', undefined],
      ]);
    } finally {
      agent.stop();
    }
  });
});
