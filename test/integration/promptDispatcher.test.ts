import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { NatsEventPublisher } from '../../src/events/natsEventPublisher.js';
import { NatsPromptDelivery } from '../../src/events/prompts/natsPromptDelivery.js';
import { ensureTopology } from '../../src/events/natsTopology.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, topologyFor } from '../../src/contract/subjects.js';
import { NO_FAILPOINTS } from '../../src/failpoints.js';
import { createRepositoryContext, rawRows, type RepositoryContext } from '../../src/repository/context.js';
import type { Database } from '../../src/repository/database.js';
import { createPromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA, OWN_RECEIPT_TABLE, type PlanCommentSchema } from '../../src/repository/schema/planCommentTables.js';
import { migrateSchema } from '../../src/repository/migrate.js';
import { openPromptStore } from '../../src/repository/prompts/promptStore.js';
import { createSession, createTask } from '../../src/repository/tasks/tasks.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import { createPromptDispatcher, type PromptDispatcher } from '../../src/services/prompts/promptDispatcher.js';
import { NO_TURN_START_HOOK } from '../../src/services/prompts/turnStartHook.js';
import { collectEvents } from '../support/busEvents.js';
import { describeEachDialect, openKandevDatabase, openSecondPool, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { ownedStore, seedPlanTask } from '../support/planComments.js';
import { insertQueuedReceipt, promptsOnStream } from '../support/promptReceipts.js';
import { seedClarificationBundle, seedTurnAt } from '../support/seed.js';

const silent = pino({ level: 'silent' });

describeEachDialect('the prompt dispatcher over real NATS on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  let second: Database | undefined;
  const dispatchers: PromptDispatcher[] = [];

  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix(`dispatch_${dialect}`);
    await ensureTopology(nc, { topology: topologyFor(prefix), streamMaxAgeMs: 3_600_000, maxDeliver: 5, ackWaitMs: 5000 });
  });
  afterAll(async () => {
    for (const d of dispatchers) await d.stop();
    await second?.destroy();
    await deleteTopology(nc, prefix);
    await nc.drain();
    await t.close();
  });

  function dispatcher(ctx: RepositoryContext, owner: string, overrides: { reservationTtlMs?: number; schema?: PlanCommentSchema } = {}): PromptDispatcher {
    const topology = topologyFor(prefix);
    const d = createPromptDispatcher({
      store: createPromptReceiptStore(ctx, overrides.schema ?? COMPLETE_PLAN_COMMENT_SCHEMA),
      delivery: new NatsPromptDelivery(nc, topology, ctx.clock),
      events: new NatsEventPublisher(nc, topology, ctx.clock),
      refreshSummary: async () => undefined,
      hook: NO_TURN_START_HOOK,
      failpoints: NO_FAILPOINTS,
      logger: silent,
      owner,
      reservationTtlMs: overrides.reservationTtlMs ?? 30_000,
      promptDeadlineMs: 5000,
      queueMax: 10,
      ineligibleRetryMs: 20,
      maxConcurrentSessions: 4,
    });
    d.start();
    dispatchers.push(d);
    return d;
  }

  const label = async (id: string) => {
    const row = await t.ctx.knex('task_session_messages').where({ id }).first();
    return row ? (JSON.parse(String(row.metadata)).prompt_delivery as string | undefined) : undefined;
  };

  it('two dispatchers on one session with five queued rows: FIFO, each published once, never two reserved or attempted at once', async () => {
    // PostgreSQL: two pools, as two replicas would have. SQLite: one process shares its one writer connection.
    second = dialect === 'postgres' ? openSecondPool(t) : undefined;
    const a = dispatcher(t.ctx, 'A');
    const b = dispatcher(second ? createRepositoryContext(second) : t.ctx, 'B');
    const task = await seedPlanTask(t.ctx);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await insertQueuedReceipt(t.ctx, { sessionId: task.sessionId, taskId: task.taskId, content: `queued ${i}` }));

    // The agent: takes each prompt, finishes its turn (the session goes IDLE) and says so (a kick).
    const topology = topologyFor(prefix);
    const sub = nc.subscribe(topology.agentPromptSubject(task.sessionId));
    const seen: string[] = [];
    void (async () => {
      for await (const m of sub) {
        seen.push((m.json() as { data: { receipt_id: string } }).data.receipt_id);
        await eventually(
          async () => ((await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE id = ?`, [seen.at(-1)])).length === 0 ? true : undefined),
          10_000,
          'the settlement',
        );
        await setSessionState(t.ctx, task.sessionId, 'IDLE');
        a.kick(task.sessionId);
        b.kick(task.sessionId);
      }
    })();

    let sampling = true;
    let maxBusy = 0;
    const sampler = (async () => {
      while (sampling) {
        const rows = await rawRows<{ n: number | string }>(
          t.ctx,
          `SELECT COUNT(*) AS n FROM queued_messages WHERE session_id = ? AND (delivery_attempted_at IS NOT NULL OR delivery_reservation_token IS NOT NULL)`,
          [task.sessionId],
        );
        maxBusy = Math.max(maxBusy, Number(rows[0]!.n));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();

    a.kick(task.sessionId);
    b.kick(task.sessionId);
    await eventually(
      async () => ((await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE session_id = ?`, [task.sessionId])).length === 0 ? true : undefined),
      30_000,
      'every receipt settled',
    );
    sampling = false;
    await sampler;
    sub.unsubscribe();

    const stored = await promptsOnStream(nc, prefix, task.sessionId);
    expect(stored.map((p) => p.receiptId)).toEqual(ids);
    expect(stored.map((p) => p.data.content)).toEqual(ids.map((_, i) => `queued ${i}`));
    expect(stored.map((p) => p.data.prompt_seq)).toEqual([1, 2, 3, 4, 5]);
    expect(seen).toEqual(ids);
    expect(maxBusy).toBe(1);
    for (const id of ids) expect(await label(id)).toBe('acknowledged');
    const owners = new Set((await t.ctx.knex('task_session_turns').where({ task_session_id: task.sessionId })).map((r: Record<string, unknown>) => r.metadata));
    expect([...owners]).toEqual(['{}']);
  });

  it('a direct send is delivered once; its replay afterwards returns the delivery from the transcript label', async () => {
    const d = dispatcher(t.ctx, 'C');
    const task = await seedPlanTask(t.ctx);
    const events = collectEvents(nc, prefix, [
      'message.added',
      'message.updated',
      'turn.started',
      'task_session.state_changed',
      'message.queue.status_changed',
    ]);
    const input = { callerId: `send-${randomUUID()}`, target: { kind: 'session' as const, sessionId: task.sessionId }, content: 'deliver me' };
    const accepted = await ownedStore(t.ctx).acceptPrompt(input);
    expect(accepted).toMatchObject({ ok: true, delivery: 'pending' });
    d.kick(task.sessionId);
    await d.whenIdle();
    expect(await label(input.callerId)).toBe('acknowledged');
    expect(await ownedStore(t.ctx).acceptPrompt(input)).toMatchObject({ ok: true, replayed: true, delivery: 'acknowledged', receiptId: input.callerId });
    const stored = await promptsOnStream(nc, prefix, task.sessionId);
    expect(stored).toHaveLength(1);
    expect(stored[0]!.data).toMatchObject({
      receipt_id: input.callerId,
      caller_id: input.callerId,
      message_id: input.callerId,
      delivery_kind: 'direct',
      content: 'deliver me',
      passthrough: false,
      prompt_seq: 1,
    });
    await eventually(() => (events.ofType('turn.started').length > 0 ? true : undefined), 5000, 'turn.started');
    expect(events.ofType('message.added').map((e) => e.data.message_id)).toEqual([input.callerId]);
    expect(events.ofType('message.updated').map((e) => (e.data.metadata as Record<string, unknown>).prompt_delivery)).toEqual(['acknowledged']);
    expect(events.ofType('task_session.state_changed').map((e) => e.data)).toEqual([
      { task_id: task.taskId, session_id: task.sessionId, old_state: 'IDLE', new_state: 'RUNNING' },
    ]);
    // A direct receipt never counts as queued: its delivery says nothing about the queue.
    expect(events.ofType('message.queue.status_changed')).toEqual([]);
    events.stop();
  });

  it('a publish nobody acknowledges is labelled unconfirmed and never sent again', async () => {
    const d = dispatcher(t.ctx, 'D');
    const task = await seedPlanTask(t.ctx);
    const jsm = await jetstreamManager(nc);
    const topology = topologyFor(prefix);
    await jsm.streams.delete(topology.agentPromptStream);
    try {
      const input = { callerId: `lost-${randomUUID()}`, target: { kind: 'session' as const, sessionId: task.sessionId }, content: 'into the void' };
      expect(await ownedStore(t.ctx).acceptPrompt(input)).toMatchObject({ ok: true });
      d.kick(task.sessionId);
      await d.whenIdle();
      expect(await label(input.callerId)).toBe('unconfirmed');
      expect(await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE id = ?`, [input.callerId])).toHaveLength(0);
      // Kicked again after the stream is back: nothing left to send.
      await ensureTopology(nc, { topology, streamMaxAgeMs: 3_600_000, maxDeliver: 5, ackWaitMs: 5000 });
      await setSessionState(t.ctx, task.sessionId, 'IDLE');
      d.kick(task.sessionId);
      await d.whenIdle();
      expect(await promptsOnStream(nc, prefix, task.sessionId)).toHaveLength(0);
    } finally {
      await ensureTopology(nc, { topology, streamMaxAgeMs: 3_600_000, maxDeliver: 5, ackWaitMs: 5000 });
    }
  });

  it('a pass over a RUNNING session, or over a queued row behind a live clarification, writes and publishes nothing; once IDLE or answered, each is delivered once', async () => {
    const d = dispatcher(t.ctx, 'E');
    const events = collectEvents(nc, prefix, [MESSAGE_QUEUE_STATUS_CHANGED]);
    const busy = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    // Promptable, but its current turn asks a question the agent waits on: a queued row must wait.
    const asking = await seedPlanTask(t.ctx, { sessionState: 'WAITING_FOR_INPUT' });
    const turnId = await seedTurnAt(t.ctx, asking.sessionId, { startedAt: new Date().toISOString() });
    const question = await seedClarificationBundle(t.ctx, { sessionId: asking.sessionId, turnId });
    const busyId = await insertQueuedReceipt(t.ctx, { sessionId: busy.sessionId, taskId: busy.taskId, content: 'after the agent' });
    const askingId = await insertQueuedReceipt(t.ctx, { sessionId: asking.sessionId, taskId: asking.taskId, content: 'after the answer' });
    const rowText = async (id: string) => JSON.stringify((await rawRows(t.ctx, `SELECT * FROM queued_messages WHERE id = ?`, [id]))[0]);
    const turns = async (sessionId: string) => (await t.ctx.knex('task_session_turns').where({ task_session_id: sessionId })).length;
    const before = { busy: await rowText(busyId), asking: await rowText(askingId) };

    for (let i = 0; i < 5; i++) {
      d.kick(busy.sessionId);
      d.kick(asking.sessionId);
      await d.whenIdle();
      await d.poll();
      await d.whenIdle();
      // Past the ineligible retry interval (20 ms): a row released by a pass would be due again.
      await new Promise((r) => setTimeout(r, 30));
    }
    for (const [id, text] of [
      [busyId, before.busy],
      [askingId, before.asking],
    ] as const) {
      expect(await rowText(id)).toBe(text);
      const row = JSON.parse(text) as Record<string, unknown>;
      expect(row).toMatchObject({
        delivery_reservation_token: null,
        delivery_reservation_owner: null,
        delivery_reservation_expires_at: null,
        delivery_attempted_at: null,
        next_attempt_at: null,
        durable_transcript_message_id: null,
        last_error: '',
      });
      expect(Number(row.delivery_attempts)).toBe(0);
    }
    expect(await turns(busy.sessionId)).toBe(0);
    expect(await turns(asking.sessionId)).toBe(1);
    expect(await promptsOnStream(nc, prefix, busy.sessionId)).toEqual([]);
    expect(await promptsOnStream(nc, prefix, asking.sessionId)).toEqual([]);
    expect(await t.ctx.knex('task_sessions').whereIn('id', [busy.sessionId, asking.sessionId]).orderBy('state')).toMatchObject([
      { state: 'RUNNING' },
      { state: 'WAITING_FOR_INPUT' },
    ]);
    await nc.flush();
    await new Promise((r) => setTimeout(r, 100));
    expect(events.events.filter((e) => e.data.session_id === busy.sessionId || e.data.session_id === asking.sessionId)).toEqual([]);

    // The agent finished: the session is IDLE, and the row is delivered.
    await setSessionState(t.ctx, busy.sessionId, 'IDLE');
    // The user answered: the question is no longer pending, and the row is delivered.
    for (const message of question.messages) {
      await t.ctx
        .knex('task_session_messages')
        .where({ id: message.id })
        .update({ metadata: JSON.stringify({ ...message.metadata, status: 'answered' }) });
    }
    for (let i = 0; i < 3; i++) {
      d.kick(busy.sessionId);
      d.kick(asking.sessionId);
      await d.whenIdle();
    }
    for (const [session, id] of [
      [busy, busyId],
      [asking, askingId],
    ] as const) {
      expect(await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE id = ?`, [id])).toEqual([]);
      expect((await promptsOnStream(nc, prefix, session.sessionId)).map((p) => p.receiptId)).toEqual([id]);
      expect(await label(id)).toBe('acknowledged');
      expect(await t.ctx.knex('task_sessions').where({ id: session.sessionId }).first()).toMatchObject({ state: 'RUNNING' });
      // Now its events come: the collector would have seen the earlier ones.
      const settled = await eventually(
        () => events.events.find((e) => e.data.session_id === session.sessionId && e.data.count === 0),
        5000,
        'the settled queue status',
      );
      expect(settled.data).toEqual({
        session_id: session.sessionId,
        task_id: session.taskId,
        entries: [],
        count: 0,
        max: 10,
        auto_run: true,
        merge_enabled: false,
      });
    }
    events.stop();
  });

  it("beside Kandev's tables: the receipts in this service's own table are delivered, direct and queued", async () => {
    const k = await openKandevDatabase(dialect);
    try {
      await migrateSchema(k.db);
      const plans = await openPromptStore(k.ctx);
      expect(plans.schema.receiptTable).toBe(OWN_RECEIPT_TABLE);
      const d = dispatcher(k.ctx, 'K', { schema: plans.schema });
      const task = await createTask(k.ctx, { workspaceId: 'ws' });
      const session = await createSession(k.ctx, { taskId: task.id, state: 'IDLE', isPrimary: true });
      const callerId = `kandev-${randomUUID()}`;
      expect(await plans.acceptPrompt({ callerId, target: { kind: 'session', sessionId: session.id }, content: 'direct' })).toMatchObject({ ok: true });
      const queuedId = await insertQueuedReceipt(k.ctx, { sessionId: session.id, taskId: task.id, content: 'queued' }, OWN_RECEIPT_TABLE);
      d.kick(session.id);
      await d.whenIdle();
      await setSessionState(k.ctx, session.id, 'IDLE');
      d.kick(session.id);
      await d.whenIdle();
      expect(await rawRows(k.ctx, `SELECT id FROM ${OWN_RECEIPT_TABLE}`)).toEqual([]);
      expect((await promptsOnStream(nc, prefix, session.id)).map((p) => p.receiptId)).toEqual([callerId, queuedId]);
      const queuedMessage = await k.ctx.knex('task_session_messages').where({ id: queuedId }).first();
      expect(JSON.parse(String(queuedMessage.metadata))).toMatchObject({ prompt_delivery: 'acknowledged', delivery_kind: 'queued' });
      expect(Number(queuedMessage.prompt_seq)).toBe(2);
    } finally {
      await k.close();
    }
  });
});
