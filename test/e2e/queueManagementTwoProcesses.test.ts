import { randomUUID } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterEach, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { rawRows } from '../../src/repository/context.js';
import { runCli } from '../support/cliProcess.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedPlanTask, type PlanTask } from '../support/planComments.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const SESSIONS = 4;
const ENTRIES_PER_SESSION = 8;

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * queue.remove and queue.reorder from a client racing two `pending-projector worker` processes on
 * one PostgreSQL database, both of whose dispatchers deliver to the same sessions. The agent takes
 * each prompt and goes idle once it is settled, so the dispatchers keep delivering while the client
 * removes and reorders. What the agent got is counted by a plain NATS subscriber (the prompt
 * stream would drop a second publish with the same Nats-Msg-Id, so counting it could not see one).
 * SQLite runs one worker per database file (test/e2e/sqliteSingleWorker.test.ts): skipped there.
 */
describeEachDialect('queue management against two worker processes on %s', (dialect) => {
  it.skipIf(dialect === 'sqlite')(
    'removals and reorders racing two dispatchers: every entry is delivered exactly once or removed, never both, none lost, and verify finds no drift',
    { timeout: 120_000 },
    async () => {
      const t: TestDatabase = await openTestDatabase(dialect);
      cleanups.push(() => t.close());
      const nc: NatsConnection = await connectTestNats();
      cleanups.push(() => nc.drain());
      const prefix = uniquePrefix(`queue_2p_${dialect}`);
      cleanups.push(() => deleteTopology(nc, prefix));
      const topology = topologyFor(prefix);

      // Every publish on any session's prompt subject, as received: there before any worker.
      const received: Array<{ sessionId: string; receiptId: string | undefined }> = [];
      const plain: Subscription = nc.subscribe(topology.agentPromptSubjects[0]!);
      cleanups.push(() => plain.unsubscribe());
      const receiptGone = async (id: string) => (await t.ctx.knex('queued_messages').where({ id }).first()) === undefined;
      // The agent: takes the prompt, and once the dispatcher settled it finishes its turn (IDLE), so
      // the next poll of either worker delivers the session's next entry.
      const agentDone = (async () => {
        for await (const m of plain) {
          // Each worker's start-up probe of its publish permission is no prompt.
          if (m.headers?.get('Pending-Projector-Probe')) continue;
          const sessionId = m.subject.slice(`${prefix}agent.`.length, -'.prompt'.length);
          const receiptId = m.headers?.get('Pending-Projector-Receipt-Id') || undefined;
          received.push({ sessionId, receiptId });
          void (async () => {
            if (receiptId) await eventually(async () => ((await receiptGone(receiptId)) ? true : undefined), 30_000, `settlement of ${receiptId}`);
            await t.ctx.knex('task_sessions').where({ id: sessionId, state: 'RUNNING' }).update({ state: 'IDLE' });
          })().catch(() => undefined);
        }
      })();
      await nc.flush();

      const env = {
        DATABASE_URL: t.url,
        NATS_URL: natsUrl(),
        SUBJECT_PREFIX: prefix,
        BOOT_RECONCILE: 'false',
        DISPATCH_POLL_MS: '50',
        QUEUE_MAX_PER_SESSION: String(ENTRIES_PER_SESSION),
        // Each delivery is logged at debug ("prompt delivered"): how the test tells which worker delivered.
        LOG_LEVEL: 'debug',
      };
      const workers: WorkerProcess[] = [];
      for (let i = 0; i < 2; i++) {
        const worker = await spawnWorker(env);
        cleanups.push(() => worker.stop());
        workers.push(worker);
      }
      const client: PendingProjectorClient = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });

      // RUNNING while the entries are queued: no dispatcher takes one before all are waiting.
      const tasks: PlanTask[] = [];
      const enqueues = new Map<string, { request: Parameters<PendingProjectorClient['enqueue']>[0]; sessionId: string }>();
      for (let s = 0; s < SESSIONS; s++) {
        const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
        tasks.push(task);
        for (let i = 0; i < ENTRIES_PER_SESSION; i++) {
          const request = { session_id: task.sessionId, caller_id: randomUUID(), content: `prompt ${s}.${i}` };
          const reply = await client.enqueue(request);
          if (!reply.ok) throw new Error(JSON.stringify(reply));
          enqueues.set(reply.queue_id!, { request, sessionId: task.sessionId });
        }
      }
      const allIds = [...enqueues.keys()];

      const removed = new Set<string>();
      let reorders = 0;
      let reorderRetries = 0;
      let inFlightRefusals = 0;

      /** Removes one entry, asking again while it is in flight (a release makes it waiting again); a settled one is gone. */
      async function remove(sessionId: string, queueId: string): Promise<void> {
        for (let attempt = 0; attempt < 20; attempt++) {
          const reply = await client.removeQueueEntry({ session_id: sessionId, queue_id: queueId });
          if (reply.ok) {
            expect(reply.removed.map((r) => r.queue_id)).toEqual([queueId]);
            removed.add(queueId);
            return;
          }
          if (reply.reason !== 'entry_in_flight') {
            expect(reply.reason).toBe('queue_entry_not_found');
            return;
          }
          inFlightRefusals++;
          await pause(20);
        }
      }

      /** Shuffles the waiting order at the listed revision, drawing again from the conflict's entries while the queue moves. */
      async function reorder(sessionId: string): Promise<void> {
        const listed = await client.listQueue({ session_id: sessionId });
        if (!listed.ok) throw new Error(JSON.stringify(listed));
        let entries = listed.entries.map((e) => e.id);
        let revision = listed.revision;
        for (let attempt = 0; attempt < 20 && entries.length >= 2; attempt++) {
          const shuffled = [...entries].sort(() => Math.random() - 0.5);
          const reply = await client.reorderQueue({ session_id: sessionId, queue_ids: shuffled, revision });
          if (reply.ok) {
            expect(reply.revision).toBeGreaterThanOrEqual(revision);
            reorders++;
            return;
          }
          expect(reply.reason).toBe('queue_changed');
          reorderRetries++;
          entries = (reply.entries as Array<{ id: string }>).map((e) => e.id);
          revision = reply.revision as number;
        }
      }

      // Go: every session idle at once, the agent keeps them going, and the client removes and reorders meanwhile.
      await t.ctx
        .knex('task_sessions')
        .whereIn(
          'id',
          tasks.map((task) => task.sessionId),
        )
        .update({ state: 'IDLE' });
      // Half the entries are picked at random for removal. Each session's remover waits for one of its picks to
      // reach the head, the entry a dispatcher reserves next, and removes it a random moment later: the removal
      // meets the reservation, on one side or the other. Its reorders run beside it.
      const targets = new Set([...allIds].sort(() => Math.random() - 0.5).slice(0, allIds.length / 2));
      const clients = tasks.flatMap((task) => [
        (async () => {
          for (;;) {
            const listed = await client.listQueue({ session_id: task.sessionId });
            if (!listed.ok) throw new Error(JSON.stringify(listed));
            const picks = listed.entries.filter((e) => targets.has(e.id));
            if (picks.length === 0) return;
            const head = listed.entries[0]!;
            if (!targets.has(head.id)) {
              await pause(5);
              continue;
            }
            targets.delete(head.id);
            await pause(Math.random() * 40);
            await remove(task.sessionId, head.id);
          }
        })(),
        (async () => {
          for (let round = 0; round < 8; round++) {
            await reorder(task.sessionId);
            await pause(10);
          }
        })(),
      ]);
      await Promise.all(clients);

      const sessionIds = tasks.map((task) => task.sessionId);
      await eventually(
        async () => {
          const rows = await t.ctx.knex('queued_messages').whereIn('session_id', sessionIds).count<{ n: number | string }[]>({ n: '*' });
          return Number(rows[0]!.n) === 0 ? true : undefined;
        },
        60_000,
        'every entry delivered or removed',
      );
      // A round trip: every publish the server routed to this connection has reached the subscriber.
      await nc.flush();
      await pause(200);
      await nc.flush();

      const delivered = received.map((r) => r.receiptId);
      // Delivered at most once, only entries that were queued, and each on its own session's subject.
      expect(delivered.filter((id) => id === undefined)).toEqual([]);
      expect(new Set(delivered).size).toBe(delivered.length);
      for (const r of received) expect(enqueues.get(r.receiptId!)?.sessionId).toBe(r.sessionId);
      // Never both, none lost.
      expect(delivered.filter((id) => removed.has(id!))).toEqual([]);
      expect([...delivered, ...removed].sort()).toEqual([...allIds].sort());
      expect(removed.size).toBeGreaterThan(0);
      expect(delivered.length).toBeGreaterThan(0);
      expect(reorders).toBeGreaterThan(0);
      // The race was real: some removal met an entry a dispatcher had reserved, and some reorder was drawn
      // from a queue a dispatcher moved before it committed.
      expect(inFlightRefusals).toBeGreaterThan(0);
      expect(reorderRetries).toBeGreaterThan(0);

      // The receipts say the same: a removed entry replays as removed, a delivered one as delivered; neither queues again.
      for (const [queueId, { request }] of enqueues) {
        const replay = await client.enqueue(request);
        expect(replay).toMatchObject({ ok: true, replayed: true, queue_id: queueId, status: removed.has(queueId) ? 'removed' : 'delivered' });
      }
      const outcomes = await rawRows<{ id: string; status: string }>(
        t.ctx,
        `SELECT id, status FROM pending_projector_prompt_outcomes WHERE ${t.ctx.dialect.inList('session_id', sessionIds).sql}`,
        t.ctx.dialect.inList('session_id', sessionIds).bindings,
      );
      expect(outcomes.map((o) => o.id).sort()).toEqual([...removed].sort());
      expect(new Set(outcomes.map((o) => o.status))).toEqual(new Set(['removed']));
      // Each delivered transcript is labelled once.
      const labelled = await t.ctx.knex('task_session_messages').whereIn('id', delivered as string[]);
      expect(labelled).toHaveLength(delivered.length);

      // Both processes delivered: the race was between two dispatchers, not one.
      const deliveriesBy = workers.map(
        (w) =>
          w
            .output()
            .split('\n')
            .filter((l) => l.includes('"prompt delivered"')).length,
      );
      expect(deliveriesBy.reduce((a, b) => a + b, 0)).toBe(delivered.length);
      for (const n of deliveriesBy) expect(n).toBeGreaterThan(0);

      // The summaries converge on queued_prompt_count 0 from the status events: verify, a separate process, finds no drift.
      const verify = await eventually(
        async () => {
          const run = await runCli(['verify', '--database-url', t.url]);
          return run.status === 0 ? run : undefined;
        },
        30_000,
        'verify exiting 0',
      );
      expect(verify.stderr).toMatch(/: 0 drifted/);

      plain.unsubscribe();
      await agentDone;
    },
  );
});
