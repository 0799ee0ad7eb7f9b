import { randomUUID } from 'node:crypto';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { createPromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import { collectEvents } from '../support/busEvents.js';
import { describeEachDialect, isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createGate } from '../support/gate.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedPlanTask, type PlanTask } from '../support/planComments.js';
import { countPromptsOnStream, insertQueuedReceipt, promptsOnStream } from '../support/promptReceipts.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const HOOK_SUBJECT = 'test.turn_start';
const encoder = new TextEncoder();
// Short enough for a takeover within the test, long enough for a renewal every third of it under load.
const TTL_MS = '1500';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

/**
 * Issue #17's crash scenarios (design §5, 13-17 and 22) with real `pending-projector worker`
 * processes: a test-only failpoint (armed through test/support/failpointWorker.ts, which only the
 * test tree holds) stops a worker at one boundary of a prompt's delivery, the test kills it with
 * SIGKILL there, and a second worker on the same database and subjects recovers. The checks are the rows, the transcript label, the messages the prompt
 * stream stores on `<prefix>agent.<session>.prompt`, and every publish on it a plain subscriber received.
 */
async function harness(dialect: DialectName) {
  const t: TestDatabase = await openTestDatabase(dialect, undefined, { file: true });
  cleanups.push(() => t.close());
  const nc: NatsConnection = await connectTestNats();
  cleanups.push(() => nc.drain());
  const prefix = uniquePrefix(`prompt_${dialect}`);
  cleanups.push(() => deleteTopology(nc, prefix));
  // The stream dedups a second publish with the same Nats-Msg-Id, so counting what it stores cannot see
  // a prompt sent twice; a plain subscriber, there before any worker, receives every publish.
  const topology = topologyFor(prefix);
  const received: Array<{ subject: string; receiptId: string | undefined }> = [];
  const plain = nc.subscribe(topology.agentPromptSubjects[0]!, {
    callback: (err, m) => {
      if (!err) received.push({ subject: m.subject, receiptId: m.headers?.get('Pending-Projector-Receipt-Id') });
    },
  });
  cleanups.push(() => plain.unsubscribe());
  await nc.flush();
  /** The receipt ids of every prompt published on the session's subject so far, as the plain subscriber received them. */
  const sent = async (sessionId: string) => {
    // A round trip: what the server routed to this connection before it has been handed to the callback.
    await nc.flush();
    return received.filter((r) => r.subject === topology.agentPromptSubject(sessionId)).map((r) => r.receiptId);
  };

  // `failpoints` starts the worker through the test-only entry that arms them (the CLI cannot).
  async function start(env: Record<string, string> = {}, failpoints?: string): Promise<WorkerProcess> {
    const worker = await spawnWorker(
      {
        DATABASE_URL: t.url,
        NATS_URL: natsUrl(),
        SUBJECT_PREFIX: prefix,
        BOOT_RECONCILE: 'false',
        RESERVATION_TTL_MS: TTL_MS,
        DISPATCH_POLL_MS: '100',
        ...env,
      },
      { failpoints },
    );
    cleanups.push(() => worker.stop());
    return worker;
  }
  const reached = (worker: WorkerProcess, text: string) =>
    eventually(() => (worker.output().includes(text) ? true : undefined), 20_000, `"${text}" in the worker log`);
  const receipt = async (id: string) => (await t.ctx.knex('queued_messages').where({ id }).first()) as Record<string, unknown> | undefined;
  const messages = async (id: string) => t.ctx.knex('task_session_messages').where({ id });
  const label = async (id: string) => {
    const [row] = await messages(id);
    return row ? (JSON.parse(String(row.metadata)).prompt_delivery as string | undefined) : undefined;
  };
  const settled = (id: string) =>
    eventually(
      async () => ((await receipt(id)) === undefined && (await label(id)) !== undefined ? true : undefined),
      30_000,
      `receipt ${id} settled or removed`,
    );
  const queued = (task: PlanTask) => insertQueuedReceipt(t.ctx, { sessionId: task.sessionId, taskId: task.taskId, content: 'queued prompt' });
  return { t, nc, prefix, start, reached, receipt, messages, label, settled, queued, sent };
}

describeEachDialect('prompt delivery across worker crashes on %s', (dialect) => {
  it('the production worker ignores the old PENDING_PROJECTOR_FAILPOINTS: with every boundary named in it, a send is delivered', async () => {
    const h = await harness(dialect);
    const every = 'after_accept_commit=hang,after_reserve=hang,after_transcript=hang,after_marker_commit=hang,after_publish=hang';
    const worker = await h.start({ PENDING_PROJECTOR_FAILPOINTS: every });
    const task = await seedPlanTask(h.t.ctx);
    const client = createPendingProjectorClient(h.nc, { prefix: h.prefix, timeoutMs: 20_000 });
    const callerId = randomUUID();
    expect(await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'no failpoint here' })).toMatchObject({ ok: true });
    await h.settled(callerId);
    expect(await h.label(callerId)).toBe('acknowledged');
    expect(await h.sent(task.sessionId)).toEqual([callerId]);
    expect(worker.output()).not.toContain('failpoint');
  });

  it("startup reconciliation alone settles a dead owner's attempted receipt before the worker serves: gone and labelled once it logs started", async () => {
    const h = await harness(dialect);
    const task = await seedPlanTask(h.t.ctx);
    const id = await h.queued(task);
    // A dead owner's state, written by the store itself: reserved for a moment, transcript, marker, and
    // never a publish or a settlement. Then the reservation runs out.
    const store = createPromptReceiptStore(h.t.ctx, COMPLETE_PLAN_COMMENT_SCHEMA);
    const dead = await store.reserveHead(task.sessionId, 'dead-owner', 300);
    expect(await store.persistTranscript(id, dead!.token)).toMatchObject({ ok: true });
    expect(await store.markAttempted(id, dead!.token, { retryAfterMs: 0 })).toMatchObject({ ok: true });
    await eventually(
      async () => ((await store.listReconcilable()).find((r) => r.receipt.id === id)?.action === 'remove' ? true : undefined),
      5000,
      'the reservation expired',
    );
    expect(await h.label(id)).toBeUndefined();

    // Ten minutes between reconciliation passes and between polls: only the pass at start can settle it.
    const worker = await h.start({ RESERVATION_TTL_MS: '600000', DISPATCH_POLL_MS: '600000' });
    // No waiting: the worker logs "worker started" after its endpoints subscribed, and the pass at start ran before them.
    expect(await h.receipt(id)).toBeUndefined();
    expect(await h.label(id)).toBe('unconfirmed');
    expect(await h.messages(id)).toHaveLength(1);
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(0);
    expect(await h.sent(task.sessionId)).toHaveLength(0);
    const out = worker.output();
    expect(out.indexOf('"removed_unconfirmed":1')).toBeGreaterThan(-1);
    expect(out.indexOf('"removed_unconfirmed":1')).toBeLessThan(out.indexOf('"worker started"'));
  });

  it('13: kill -9 after the accepting COMMIT, before the reservation: the restart delivers it once, one transcript', async () => {
    const h = await harness(dialect);
    // No poll and no reconciliation pass (every TTL) before the kill: only the (hung) kick could have reserved it.
    const first = await h.start({ DISPATCH_POLL_MS: '600000', RESERVATION_TTL_MS: '600000' }, 'after_accept_commit=hang');
    const task = await seedPlanTask(h.t.ctx);
    const client = createPendingProjectorClient(h.nc, { prefix: h.prefix, timeoutMs: 20_000 });
    const callerId = randomUUID();
    const reply = client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'survive the crash' }, { timeoutMs: 1000 });
    await h.reached(first, 'failpoint reached after_accept_commit');
    expect(await h.receipt(callerId)).toMatchObject({ delivery_kind: 'direct', delivery_reservation_token: null, delivery_attempted_at: null });
    await first.kill9();
    await reply;

    await h.start();
    await h.settled(callerId);
    expect(await h.label(callerId)).toBe('acknowledged');
    expect(await h.messages(callerId)).toHaveLength(1);
    const stored = await promptsOnStream(h.nc, h.prefix, task.sessionId);
    expect(stored.map((p) => p.receiptId)).toEqual([callerId]);
    expect(await h.sent(task.sessionId)).toEqual([callerId]);
    expect(await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'survive the crash' })).toMatchObject({
      ok: true,
      replayed: true,
      delivery: 'acknowledged',
    });
  });

  it('14: kill -9 after the reservation, before the transcript: after the TTL the restart takes over; one transcript, one prompt', async () => {
    const h = await harness(dialect);
    const first = await h.start({}, 'after_reserve=hang');
    const task = await seedPlanTask(h.t.ctx);
    const id = await h.queued(task);
    await h.reached(first, 'failpoint reached after_reserve');
    expect((await h.receipt(id))!.delivery_reservation_token).not.toBeNull();
    expect(await h.messages(id)).toHaveLength(0);
    await first.kill9();

    await h.start();
    await h.settled(id);
    expect(await h.label(id)).toBe('acknowledged');
    expect(await h.messages(id)).toHaveLength(1);
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(1);
    expect(await h.sent(task.sessionId)).toEqual([id]);
  });

  it('15: kill -9 after the transcript, before the marker: the takeover reuses the transcript; one prompt', async () => {
    const h = await harness(dialect);
    const first = await h.start({}, 'after_transcript=hang');
    const task = await seedPlanTask(h.t.ctx);
    const id = await h.queued(task);
    await h.reached(first, 'failpoint reached after_transcript');
    const [transcript] = await h.messages(id);
    expect(transcript).toBeDefined();
    await first.kill9();

    await h.start();
    await h.settled(id);
    const after = await h.messages(id);
    expect(after).toHaveLength(1);
    expect(after[0]!.turn_id).toBe(transcript!.turn_id);
    expect(await h.t.ctx.knex('task_session_turns').where({ task_session_id: task.sessionId })).toHaveLength(1);
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(1);
    expect(await h.sent(task.sessionId)).toEqual([id]);
    expect(await h.label(id)).toBe('acknowledged');
  });

  it('16: kill -9 after the marker commit, before the publish: removed without dispatch, zero prompts, unconfirmed, message.updated published', async () => {
    const h = await harness(dialect);
    const events = collectEvents(h.nc, h.prefix, ['message.updated']);
    cleanups.push(() => events.stop());
    const first = await h.start({}, 'after_marker_commit=hang');
    const task = await seedPlanTask(h.t.ctx);
    const id = await h.queued(task);
    await h.reached(first, 'failpoint reached after_marker_commit');
    expect((await h.receipt(id))!.delivery_attempted_at).not.toBeNull();
    await first.kill9();

    const second = await h.start();
    await h.settled(id);
    await h.reached(second, '"removed_unconfirmed":1');
    expect(await h.label(id)).toBe('unconfirmed');
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(0);
    expect(await h.sent(task.sessionId)).toHaveLength(0);
    await eventually(
      () => (events.about('message_id', id).some((e) => (e.data.metadata as Record<string, unknown>).prompt_delivery === 'unconfirmed') ? true : undefined),
      10_000,
      'message.updated with the label',
    );
  });

  it('17: kill -9 after the publish, before the settlement: removed without a second publish, exactly one prompt, acknowledged', async () => {
    const h = await harness(dialect);
    const first = await h.start({}, 'after_publish=hang');
    const task = await seedPlanTask(h.t.ctx);
    const id = await h.queued(task);
    await h.reached(first, 'failpoint reached after_publish');
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(1);
    expect(await h.sent(task.sessionId)).toEqual([id]);
    await first.kill9();

    const second = await h.start();
    await h.settled(id);
    await h.reached(second, '"removed_acknowledged":1');
    expect(await h.label(id)).toBe('acknowledged');
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(1);
    expect(await h.sent(task.sessionId)).toEqual([id]);
  });
});

// Two worker processes on one database: PostgreSQL only, a second worker on a SQLite file is refused
// (test/e2e/sqliteSingleWorker.test.ts).
describe.skipIf(!isAvailable('postgres'))('prompt delivery by two worker processes on postgres', () => {
  it('22: a stale owner stalled past the TTL (process stopped inside its hook) loses the receipt to a takeover; it writes and publishes nothing after', async () => {
    const h = await harness('postgres');
    // The test serves the turn-start hook and holds the first request (A's) until the end.
    const gate = createGate();
    const firstRequest = createGate();
    let requests = 0;
    const sub: Subscription = h.nc.subscribe(`${h.prefix}${HOOK_SUBJECT}`);
    cleanups.push(() => sub.unsubscribe());
    void (async () => {
      for await (const msg of sub) {
        void (async (m: Msg) => {
          if (++requests === 1) {
            firstRequest.open();
            await gate.opened;
          }
          m.respond(encoder.encode(JSON.stringify({ ok: true })));
        })(msg);
      }
    })();
    const hookEnv = { TURN_START_HOOK_SUBJECT: HOOK_SUBJECT, TURN_START_HOOK_TIMEOUT_MS: '120000' };
    const a = await h.start(hookEnv);
    const task = await seedPlanTask(h.t.ctx);
    const id = await h.queued(task);
    await firstRequest.opened;
    const b = await h.start(hookEnv);
    const tokenOfA = (await h.receipt(id))!.delivery_reservation_token;
    // A stalls entirely (its heartbeat too) past the TTL.
    a.child.kill('SIGSTOP');
    try {
      await h.settled(id);
    } finally {
      a.child.kill('SIGCONT');
    }
    expect(await h.label(id)).toBe('acknowledged');
    const stored = await promptsOnStream(h.nc, h.prefix, task.sessionId);
    expect(stored.map((p) => p.receiptId)).toEqual([id]);
    expect(await h.sent(task.sessionId)).toEqual([id]);
    expect(b.output()).not.toContain('reservation lost');
    expect(tokenOfA).not.toBeNull();

    // A resumes, its hook answers: its next fenced write matches nothing, and it stops there.
    gate.open();
    await h.reached(a, 'reservation lost');
    expect(await h.messages(id)).toHaveLength(1);
    expect(await countPromptsOnStream(h.nc, h.prefix, task.sessionId)).toBe(1);
    expect(await h.sent(task.sessionId)).toEqual([id]);
    expect(await h.label(id)).toBe('acknowledged');
  });

  it('11: two worker processes on one session with five queued rows: FIFO, each published once, never two reserved or attempted at once', async () => {
    const h = await harness('postgres');
    await h.start();
    await h.start();
    const task = await seedPlanTask(h.t.ctx);
    // The agent: takes each prompt and finishes its turn, so the session is IDLE for the next one
    // (the workers' polls pick it up).
    const sub = h.nc.subscribe(`${h.prefix}agent.${task.sessionId}.prompt`);
    cleanups.push(() => sub.unsubscribe());
    void (async () => {
      for await (const m of sub) {
        const receiptId = (m.json() as { data: { receipt_id: string } }).data.receipt_id;
        await eventually(async () => ((await h.receipt(receiptId)) === undefined ? true : undefined), 20_000, 'the settlement');
        await h.t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state: 'IDLE' });
      }
    })();
    let sampling = true;
    let maxBusy = 0;
    const sampler = (async () => {
      while (sampling) {
        const busy = await h.t.ctx
          .knex('queued_messages')
          .where({ session_id: task.sessionId })
          .where((q) => q.whereNotNull('delivery_attempted_at').orWhereNotNull('delivery_reservation_token'));
        maxBusy = Math.max(maxBusy, busy.length);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await h.queued(task));
    for (const id of ids) await h.settled(id);
    sampling = false;
    await sampler;
    const stored = await promptsOnStream(h.nc, h.prefix, task.sessionId);
    expect(stored.map((p) => p.receiptId)).toEqual(ids);
    expect(await h.sent(task.sessionId)).toEqual(ids);
    expect(maxBusy).toBe(1);
    for (const id of ids) expect(await h.label(id)).toBe('acknowledged');
  });
});
