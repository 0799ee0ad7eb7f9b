import { randomUUID } from 'node:crypto';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_SESSION_STATE_CHANGED } from '../../src/contract/kandevEvents.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, PLAN_COMMENTS_CHANGED } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { rawRows } from '../../src/repository/context.js';
import { createSession, setSessionState } from '../../src/repository/tasks/tasks.js';
import { instantAfter } from '../../src/timestamps.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createGate, type Gate } from '../support/gate.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { acceptanceState, seedPlanTask } from '../support/planComments.js';
import { promptsOnStream } from '../support/promptReceipts.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const QUEUE_MAX = 3;
const HOOK_SUBJECT = 'test.turn_start';
const encoder = new TextEncoder();

/**
 * queue.enqueue and queue.list through the typed client against a real worker on a real NATS: the
 * accepting transaction with the queued delivery kind, its refusals (each writing nothing), caller-id
 * replay while the entry waits and after its delivery, the limit, and the status event.
 *
 * The worker's prompt dispatcher runs: it delivers the head receipt of any promptable session (IDLE
 * or WAITING_FOR_INPUT). So the sessions whose queue a test inspects are RUNNING, as they are when
 * a user queues for real (the agent is working); the dispatcher reads a busy session's head and
 * writes nothing. A test that needs a delivery makes the session IDLE the way Kandev does.
 */
describeEachDialect('queue endpoints over a real NATS on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let bus: ReturnType<typeof collectEvents>;
  let hookSub: Subscription;
  const held = new Map<string, { gate: Gate; reached: Gate }>();
  const hookCalls: string[] = [];

  /** The turn-start hook: replies at once unless the test holds it for a caller id. */
  function serveHook(subject: string): Subscription {
    const sub = nc.subscribe(subject);
    void (async () => {
      for await (const msg of sub) {
        void (async (m: Msg) => {
          const request = m.json<{ caller_id: string }>();
          hookCalls.push(request.caller_id);
          const entry = held.get(request.caller_id);
          if (entry) {
            entry.reached.open();
            await entry.gate.opened;
          }
          m.respond(encoder.encode(JSON.stringify({ ok: true })));
        })(msg);
      }
    })();
    return sub;
  }

  /** A task with `n` plan comments, its primary session in `sessionState` (RUNNING: nothing is delivered). */
  async function seedComments(n: number, sessionState = 'RUNNING') {
    const task = await seedPlanTask(t.ctx, { sessionState });
    const comments = [];
    for (let i = 0; i < n; i++) {
      const reply = await client.createPlanComment({
        task_id: task.taskId,
        plan_id: task.planId,
        comment_id: `c-${randomUUID()}`,
        body: `comment ${i}`,
        selected_text: `line ${i}`,
      });
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      comments.push(reply.comment!);
    }
    return { ...task, comments };
  }

  /** Everything an enqueue may write, with each receipt's queue columns. */
  async function queueState(taskId: string): Promise<Record<string, unknown>> {
    const receipts = await rawRows(
      t.ctx,
      `SELECT id, session_id, position, delivery_kind, metadata_json, attachments_json, durable_transcript_message_id, delivery_attempted_at FROM queued_messages ORDER BY id`,
    );
    return { ...(await acceptanceState(t.ctx, taskId)), receipts };
  }

  /** The agent finished its turn: Kandev sets the session IDLE and publishes the change, which kicks the dispatcher. */
  async function agentGoesIdle(taskId: string, sessionId: string) {
    await rawRows(t.ctx, `UPDATE task_sessions SET state = 'IDLE' WHERE id = ?`, [sessionId]);
    await jetstream(nc).publish(
      `${prefix}${TASK_SESSION_STATE_CHANGED}`,
      envelope(TASK_SESSION_STATE_CHANGED, { task_id: taskId, session_id: sessionId, old_state: 'RUNNING', new_state: 'IDLE' }),
    );
  }

  /** The delivery label of the transcript message `id` once its receipt was settled (deleted and labelled). */
  async function settled(id: string): Promise<string> {
    return eventually(
      async () => {
        if ((await rawRows(t.ctx, 'SELECT id FROM queued_messages WHERE id = ?', [id])).length > 0) return undefined;
        const message = await t.ctx.knex('task_session_messages').where({ id }).first();
        return message ? (JSON.parse(String(message.metadata)).prompt_delivery as string | undefined) : undefined;
      },
      20_000,
      `the settlement of receipt ${id}`,
    );
  }

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`queue_${dialect}`);
    bus = collectEvents(nc, prefix, [PLAN_COMMENTS_CHANGED, MESSAGE_QUEUE_STATUS_CHANGED]);
    hookSub = serveHook(`${prefix}${HOOK_SUBJECT}`);
    worker = await startWorker({
      db: t.db,
      nc,
      config: testWorkerConfig(prefix, { queueMaxPerSession: QUEUE_MAX, turnStartHookSubject: HOOK_SUBJECT, admissionLockTimeoutMs: 20_000 }),
      logger: silentLogger(),
    });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    hookSub?.unsubscribe();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('an enqueue consumes its comments and claims its attachments in one transaction, writes a queued receipt and no transcript, and publishes the queue status', async () => {
    const task = await seedComments(3);
    const owner = `user-${randomUUID()}`;
    const stage = await client.stageAttachment({
      id: `att-${randomUUID()}`,
      owner_id: owner,
      workspace_id: task.workspaceId,
      name: 'a.png',
      mime_type: 'image/png',
      size_bytes: 10,
      storage_key: `key-${randomUUID()}`,
    });
    if (!stage.ok) throw new Error(JSON.stringify(stage));
    const before = await acceptanceState(t.ctx, task.taskId);
    const callerId = randomUUID();
    const refs = task.comments.slice(0, 2).map((c) => ({ id: c.id, version: c.version }));

    const reply = await client.enqueue({
      session_id: task.sessionId,
      caller_id: callerId,
      content: 'after this turn',
      plan_comment_refs: refs,
      attachment_ids: [stage.attachment.id],
      attachment_owner_id: owner,
      model: 'm-1',
      plan_mode: true,
    });
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    expect(reply).toMatchObject({
      task_id: task.taskId,
      session_id: task.sessionId,
      caller_id: callerId,
      receipt_id: callerId,
      queue_id: callerId,
      message_id: null,
      delivery_kind: 'queued',
      replayed: false,
      delivery: 'pending',
    });
    expect(reply.position).toEqual(expect.any(Number));
    expect(reply.plan_comments).toMatchObject({ revision: 4, comments: [{ id: task.comments[2]!.id }] });

    const receipt = (await rawRows<Record<string, unknown>>(t.ctx, 'SELECT * FROM queued_messages WHERE id = ?', [callerId]))[0]!;
    expect(receipt).toMatchObject({
      session_id: task.sessionId,
      task_id: task.taskId,
      delivery_kind: 'queued',
      model: 'm-1',
      durable_transcript_message_id: null,
      delivery_reservation_token: null,
      delivery_attempted_at: null,
    });
    expect(Number(receipt.plan_mode)).toBe(1);
    expect(Number(receipt.position)).toBe(reply.position);
    expect(String(receipt.content)).toMatch(/^### Plan Comments\n[\s\S]*comment 0[\s\S]*comment 1[\s\S]*---\n\nafter this turn$/);
    expect(JSON.parse(String(receipt.metadata_json))).toMatchObject({
      client_queue_id: callerId,
      plan_comment_refs: refs,
      plan_comment_request_fingerprint: expect.any(String),
    });
    expect(JSON.parse(String(receipt.attachments_json))).toEqual([
      expect.objectContaining({ id: stage.attachment.id, storage_key: stage.attachment.storage_key }),
    ]);

    const after = await acceptanceState(t.ctx, task.taskId);
    // No transcript: no message, turn or prompt_seq until the dispatcher reserves the entry.
    expect(after.counts).toEqual({ ...(before.counts as object), task_plan_comments: (before.counts as Record<string, number>).task_plan_comments! - 2 });
    expect(after.seq).toEqual(before.seq);
    const attachment = await t.ctx.knex('task_message_attachments').where({ id: stage.attachment.id }).first();
    expect(attachment).toMatchObject({ state: 'claimed', queue_id: callerId, message_id: '', task_id: task.taskId, session_id: task.sessionId });

    const status = await eventually(
      () => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === task.sessionId),
      10_000,
      'the queue status event',
    );
    // Kandev's shape: its web client replaces its queue panel with `entries`.
    expect(status.data).toMatchObject({ session_id: task.sessionId, task_id: task.taskId, count: 1, max: QUEUE_MAX, auto_run: true, merge_enabled: false });
    expect(status.data.entries).toMatchObject([{ id: callerId, session_id: task.sessionId, task_id: task.taskId, version: 1 }]);
    expect(status.source).toBe('pending-projector');
    // In the worker's events stream with a message id of its own, so a repeat of it is dropped.
    const jsm = await jetstreamManager(nc);
    const stored = await jsm.streams.getMessage(worker.topology.eventsStream, { last_by_subj: `${prefix}${MESSAGE_QUEUE_STATUS_CHANGED}` });
    const msgId = `message.queue.status_changed:${task.sessionId}:${callerId}:enqueued:1`;
    expect(stored?.header.get('Nats-Msg-Id')).toBe(msgId);
    expect((await jetstream(nc).publish(`${prefix}${MESSAGE_QUEUE_STATUS_CHANGED}`, stored!.data, { msgID: msgId })).duplicate).toBe(true);
    await eventually(
      () => bus.ofType(PLAN_COMMENTS_CHANGED).find((e) => e.data.task_id === task.taskId && e.data.revision === 4),
      10_000,
      'the comments.changed event',
    );

    const listed = await client.listQueue({ session_id: task.sessionId });
    expect(listed).toEqual({
      ok: true,
      entries: [
        {
          id: callerId,
          session_id: task.sessionId,
          task_id: task.taskId,
          position: reply.position,
          version: 1,
          content: receipt.content,
          model: 'm-1',
          plan_mode: true,
          queued_at: expect.any(String),
          queued_by: 'user',
          attachments: [expect.objectContaining({ id: stage.attachment.id })],
        },
      ],
      count: 1,
      max: QUEUE_MAX,
      revision: expect.any(Number),
      auto_run: true,
    });
  });

  it('the same request again while the entry waits replays its queue_id and position and writes nothing; another request under the caller id is caller_id_conflict', async () => {
    const task = await seedComments(1);
    const callerId = randomUUID();
    const request = { session_id: task.sessionId, caller_id: callerId, content: 'queued once', plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] };
    const first = await client.enqueue(request);
    if (!first.ok) throw new Error(JSON.stringify(first));
    await eventually(() => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === task.sessionId), 10_000, 'the first status event');
    const state = await queueState(task.taskId);

    const again = await client.enqueue(request);
    expect(again).toMatchObject({
      ok: true,
      replayed: true,
      queue_id: first.queue_id,
      position: first.position,
      delivery_kind: 'queued',
      message_id: null,
      delivery: 'pending',
      status: 'waiting',
    });
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ count: 1 });
    expect(await queueState(task.taskId)).toEqual(state);

    for (const other of [
      { ...request, content: 'another text' },
      { ...request, plan_comment_refs: [] },
      { ...request, model: 'other' },
    ]) {
      expect(await client.enqueue(other)).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'caller_id_conflict' });
    }
    // A direct send under a queued entry's caller id is another request too.
    expect(await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'queued once' })).toMatchObject({
      ok: false,
      reason: 'caller_id_conflict',
    });
    expect(await queueState(task.taskId)).toEqual(state);
    // A replay publishes nothing.
    expect(bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).filter((e) => e.data.session_id === task.sessionId)).toHaveLength(1);
  });

  it('after the dispatcher delivered the entry and deleted it, the transcript message with the caller id answers the replay', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const callerId = randomUUID();
    const request = { session_id: task.sessionId, caller_id: callerId, content: 'deliver me' };
    const first = await client.enqueue(request);
    if (!first.ok) throw new Error(JSON.stringify(first));
    expect(first).toMatchObject({ replayed: false, message_id: null, delivery: 'pending' });

    // The agent finishes its turn: the dispatcher delivers the entry, deletes it and labels its transcript.
    await agentGoesIdle(task.taskId, task.sessionId);
    const delivery = await settled(callerId);
    expect(delivery).toBe('acknowledged');
    const prompts = await promptsOnStream(nc, prefix, task.sessionId);
    expect(prompts.map((p) => p.receiptId)).toEqual([callerId]);
    expect(prompts[0]!.data).toMatchObject({ receipt_id: callerId, caller_id: callerId, message_id: callerId, delivery_kind: 'queued', content: 'deliver me' });
    expect(hookCalls).toContain(callerId);
    expect(await t.ctx.knex('task_sessions').where({ id: task.sessionId }).first()).toMatchObject({ state: 'RUNNING' });
    const message = await t.ctx.knex('task_session_messages').where({ id: callerId }).first();
    expect(JSON.parse(String(message.metadata))).toMatchObject({
      client_message_id: callerId,
      queue_id: callerId,
      delivery_kind: 'queued',
      prompt_delivery: 'acknowledged',
    });

    expect(await client.enqueue(request)).toMatchObject({
      ok: true,
      replayed: true,
      receipt_id: callerId,
      queue_id: callerId,
      message_id: callerId,
      position: null,
      delivery_kind: 'queued',
      delivery,
      status: 'delivered',
    });
    expect(await client.enqueue({ ...request, content: 'other' })).toMatchObject({ ok: false, reason: 'caller_id_conflict' });
    expect(await t.ctx.knex('queued_messages').where({ id: callerId }).first()).toBeUndefined();
    // The replay delivered nothing again.
    expect(await promptsOnStream(nc, prefix, task.sessionId)).toHaveLength(1);
  });

  it('a session holds at most QUEUE_MAX_PER_SESSION waiting entries: the next is conflict queue_full with count and max, and consumes nothing', async () => {
    const task = await seedComments(1);
    const positions: number[] = [];
    for (let i = 0; i < QUEUE_MAX; i++) {
      const reply = await client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: `prompt ${i}` });
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      positions.push(reply.position!);
    }
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(new Set(positions).size).toBe(QUEUE_MAX);
    const state = await queueState(task.taskId);
    const full = await client.enqueue({
      session_id: task.sessionId,
      caller_id: randomUUID(),
      content: 'one too many',
      plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }],
    });
    expect(full).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'queue_full', count: QUEUE_MAX, max: QUEUE_MAX });
    expect(await queueState(task.taskId)).toEqual(state);
    const listed = await client.listQueue({ session_id: task.sessionId });
    if (!listed.ok) throw new Error(JSON.stringify(listed));
    expect(listed.entries.map((e) => e.content)).toEqual(['prompt 0', 'prompt 1', 'prompt 2']);

    // A reserved head no longer waits (queue.list and the limit count waiting entries only). The
    // reservation is live, another dispatcher's: this worker's reconciliation leaves it alone.
    await t.ctx
      .knex('queued_messages')
      .where({ id: listed.entries[0]!.id })
      .update({
        delivery_reservation_token: 'held',
        delivery_reservation_owner: 'another-dispatcher',
        delivery_reservation_expires_at: instantAfter(t.ctx.clock(), 3_600_000),
      });
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ count: 2 });
    expect(await client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: 'fits again' })).toMatchObject({ ok: true, replayed: false });
  });

  it("a comment-bearing enqueue waits while a send holds the task's admission lease, then fails closed on the comment the send consumed; an enqueue runs no turn-start hook", async () => {
    // IDLE: a direct send needs a promptable session. The dispatcher delivers it and claims the session RUNNING.
    const task = await seedComments(2, 'IDLE');
    const sendId = randomUUID();
    const entry = { gate: createGate(), reached: createGate() };
    held.set(sendId, entry);
    const sending = client.sendMessage({
      session_id: task.sessionId,
      caller_id: sendId,
      content: 'now',
      plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }],
    });
    await entry.reached.opened;
    const queueId = randomUUID();
    let enqueueSettled = false;
    const enqueuing = client
      .enqueue({
        session_id: task.sessionId,
        caller_id: queueId,
        content: 'later',
        plan_comment_refs: [
          { id: task.comments[0]!.id, version: 1 },
          { id: task.comments[1]!.id, version: 1 },
        ],
      })
      .finally(() => (enqueueSettled = true));
    // A request after the enqueue on the same connection: the enqueue reached the worker before this reply.
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ ok: true, count: 0 });
    expect(enqueueSettled).toBe(false);
    entry.gate.open();
    const [sent, queued] = await Promise.all([sending, enqueuing]);
    expect(sent).toMatchObject({ ok: true, replayed: false });
    expect(queued).toMatchObject({
      ok: false,
      error: { code: 'conflict' },
      reason: 'plan_comments_changed',
      plan_comments: { revision: 3, comments: [{ id: task.comments[1]!.id }] },
    });
    expect(await t.ctx.knex('queued_messages').where({ id: queueId }).first()).toBeUndefined();
    expect(hookCalls).not.toContain(queueId);

    const retried = await client.enqueue({
      session_id: task.sessionId,
      caller_id: queueId,
      content: 'later',
      plan_comment_refs: [{ id: task.comments[1]!.id, version: 1 }],
    });
    expect(retried).toMatchObject({ ok: true, replayed: false, plan_comments: { revision: 4, comments: [] } });
    expect(hookCalls).not.toContain(queueId);

    // The send is delivered (direct rows come first); the agent now works, so the entry waits, untouched.
    expect(await settled(sendId)).toBe('acknowledged');
    expect((await promptsOnStream(nc, prefix, task.sessionId)).map((p) => p.receiptId)).toEqual([sendId]);
    expect(await t.ctx.knex('task_sessions').where({ id: task.sessionId }).first()).toMatchObject({ state: 'RUNNING' });
    expect(await t.ctx.knex('queued_messages').where({ id: queueId }).first()).toMatchObject({
      delivery_reservation_token: null,
      delivery_attempted_at: null,
      durable_transcript_message_id: null,
    });
    expect(hookCalls).not.toContain(queueId);
  });

  it('concurrent enqueues into one session never pass the limit and never share a position', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const replies = await Promise.all(
      Array.from({ length: QUEUE_MAX + 3 }, (_, i) => client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: `racing ${i}` })),
    );
    const accepted = replies.filter((r) => r.ok);
    expect(accepted).toHaveLength(QUEUE_MAX);
    expect(replies.filter((r) => !r.ok)).toEqual(
      Array.from({ length: 3 }, () => expect.objectContaining({ reason: 'queue_full', count: QUEUE_MAX, max: QUEUE_MAX })),
    );
    expect(new Set(accepted.map((r) => (r as { position: number }).position)).size).toBe(QUEUE_MAX);
    const rows = await t.ctx.knex('queued_messages').where({ session_id: task.sessionId });
    expect(rows).toHaveLength(QUEUE_MAX);
  });

  it('an enqueue to a session of an archived task, or to a terminal session, is refused and writes nothing', async () => {
    const task = await seedComments(1);
    const terminal = await createSession(t.ctx, { taskId: task.taskId, state: 'RUNNING' });
    await setSessionState(t.ctx, terminal.id, 'COMPLETED');
    const state = await queueState(task.taskId);
    const refs = [{ id: task.comments[0]!.id, version: 1 }];
    expect(await client.enqueue({ session_id: terminal.id, caller_id: randomUUID(), content: 'x', plan_comment_refs: refs })).toMatchObject({
      ok: false,
      error: { code: 'conflict' },
      reason: 'session_unavailable',
      state: 'COMPLETED',
    });
    // A RUNNING session (not promptable, but active) takes a queued prompt.
    const running = await createSession(t.ctx, { taskId: task.taskId, state: 'RUNNING' });
    expect(await client.enqueue({ session_id: running.id, caller_id: randomUUID(), content: 'after the agent finishes' })).toMatchObject({
      ok: true,
      replayed: false,
    });
    const afterRunning = await queueState(task.taskId);

    await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: '2026-09-01T00:00:00.000000Z' });
    expect(await client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: 'x', plan_comment_refs: refs })).toMatchObject({
      ok: false,
      error: { code: 'conflict' },
      reason: 'task_inactive',
    });
    expect(await client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: 'x' })).toMatchObject({
      ok: false,
      error: { code: 'conflict' },
      reason: 'task_inactive',
    });
    expect(await queueState(task.taskId)).toEqual(afterRunning);
    expect(state.revision).toBe(afterRunning.revision);
  });

  it('bad input gets its documented code and writes nothing', async () => {
    const task = await seedComments(2);
    const foreign = await seedComments(1);
    const [c1] = task.comments;
    const subject = (name: string) => `${prefix}pending_projector.v1.${name}`;
    const raw = async (name: string, data: Uint8Array) => (await nc.request(subject(name), data, { timeout: 10_000 })).json<Record<string, unknown>>();
    const state = await queueState(task.taskId);
    const enqueue = (over: Record<string, unknown>) =>
      client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: 'x', plan_comment_refs: [{ id: c1!.id, version: 1 }], ...over } as never);
    const badRequest = { ok: false, error: { code: 'bad_request' } };

    expect(await raw('queue.enqueue', encoder.encode('{not json'))).toMatchObject(badRequest);
    expect(
      await raw('queue.enqueue', encoder.encode(JSON.stringify({ session_id: task.sessionId, caller_id: randomUUID(), content: 'x'.repeat(70 * 1024) }))),
    ).toMatchObject(badRequest);
    expect(await raw('queue.list', encoder.encode('[]'))).toMatchObject(badRequest);
    expect(await enqueue({ caller_id: 'has space' })).toMatchObject(badRequest);
    expect(await enqueue({ caller_id: 'a>b' })).toMatchObject(badRequest);
    expect(await enqueue({ caller_id: 'a*' })).toMatchObject(badRequest);
    expect(await enqueue({ caller_id: 'c'.repeat(129) })).toMatchObject(badRequest);
    expect(await enqueue({ caller_id: '' })).toMatchObject(badRequest);
    expect(await enqueue({ session_id: 's'.repeat(10 * 1024) })).toMatchObject(badRequest);
    expect(await enqueue({ plan_comment_refs: [{ id: 'c'.repeat(10 * 1024), version: 1 }] })).toMatchObject(badRequest);
    expect(await enqueue({ attachment_ids: ['a'.repeat(10 * 1024)], attachment_owner_id: 'o' })).toMatchObject(badRequest);
    expect(await enqueue({ plan_comment_refs: [{ id: c1!.id, version: 0 }] })).toMatchObject(badRequest);
    expect(await enqueue({ plan_mode: 'yes' })).toMatchObject(badRequest);
    expect(await enqueue({ priority: 1 })).toMatchObject(badRequest);
    expect(
      await enqueue({
        plan_comment_refs: [
          { id: c1!.id, version: 1 },
          { id: c1!.id, version: 1 },
        ],
      }),
    ).toMatchObject({ error: { code: 'bad_request' }, reason: 'duplicate_refs' });
    expect(await enqueue({ content: '', plan_comment_refs: [] })).toMatchObject({ error: { code: 'bad_request' }, reason: 'empty_prompt' });
    expect(await enqueue({ attachment_ids: ['a1'] })).toMatchObject({ error: { code: 'bad_request' }, reason: 'attachment_owner_required' });
    expect(await enqueue({ session_id: 'no-such-session' })).toMatchObject({ error: { code: 'not_found' }, reason: 'session_not_found' });
    expect(await client.listQueue({ session_id: 'no-such-session' })).toMatchObject({ error: { code: 'not_found' }, reason: 'session_not_found' });
    expect(await enqueue({ session_id: foreign.sessionId })).toMatchObject({ error: { code: 'conflict' }, reason: 'plan_comments_changed' });
    expect(await enqueue({ plan_comment_refs: [{ id: 'no-such-comment', version: 1 }] })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'plan_comments_changed',
    });
    expect(await enqueue({ plan_comment_refs: [{ id: foreign.comments[0]!.id, version: 1 }] })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'plan_comments_changed',
    });
    const stale = await enqueue({ plan_comment_refs: [{ id: c1!.id, version: 2 }] });
    expect(stale).toMatchObject({ error: { code: 'conflict' }, reason: 'plan_comments_changed', plan_comments: { task_id: task.taskId, revision: 2 } });
    expect(await enqueue({ attachment_ids: ['no-such-attachment'], attachment_owner_id: 'someone' })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'attachments_unavailable',
    });
    expect(await queueState(task.taskId)).toEqual(state);
    expect(bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).filter((e) => e.data.task_id === task.taskId)).toEqual([]);
  });
});
