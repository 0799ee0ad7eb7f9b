import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { ConflictExhaustedError } from '../../src/errors.js';
import { CLARIFICATION_PRIMARY_ANSWERED, CLARIFICATION_STALE_DISMISSED, MESSAGE_UPDATED } from '../../src/contract/kandevEvents.js';
import { NatsClarificationDelivery, resumeMsgId } from '../../src/events/clarifications/natsClarificationDelivery.js';
import { NatsEventPublisher } from '../../src/events/natsEventPublisher.js';
import { ensureTopology } from '../../src/events/natsTopology.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { findMessagesByPendingId } from '../../src/repository/clarifications/clarifications.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { createClarificationStore } from '../../src/repository/clarifications/clarificationStore.js';
import { createClarificationService } from '../../src/services/clarifications/clarificationService.js';
import { newestDurableTurnId } from '../../src/turns/newestDurableTurnId.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import { openSecondPool, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { startFakeAgent } from '../support/fakeAgent.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, serviceContext, type RowWriter, type SchemaKind } from '../support/rowWriters.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const RESPOND_DEADLINE_MS = 1500;

const answers = (...selected: string[]) => selected.map((option, i) => ({ question_id: `q${i + 1}`, selected_options: [option], custom_text: '' }));

/**
 * A worker on a second pool over a file database, with its own subject prefix; the test reads and
 * seeds through the first pool, so on SQLite its reads never wait for the worker's transactions and
 * see only what the worker committed.
 */
async function startWorkerOnSecondPool(dialect: DialectName, schema: SchemaKind, nc: NatsConnection) {
  const t = await openSchemaDatabase(dialect, schema, { file: true });
  const workerDb = openSecondPool(t);
  const prefix = uniquePrefix(`clar2_${dialect}`);
  const worker = await startWorker({ db: workerDb, nc, config: testWorkerConfig(prefix, { respondDeadlineMs: RESPOND_DEADLINE_MS }), logger: silentLogger() });
  const ctx = await serviceContext(t, schema);
  const w = rowWriter(schema, t.ctx);
  const storedPending = async (taskId: string) => {
    const stored = (await loadStatusSummaries(ctx, [taskId])).get(taskId);
    return stored ? { revision: stored.revision, pending: (JSON.parse(stored.summary) as { pending_action?: string }).pending_action } : undefined;
  };
  return {
    prefix,
    worker,
    client: createPendingProjectorClient(nc, { prefix }),
    storedPending,
    rowsOf: (pendingId: string) => findMessagesByPendingId(ctx, pendingId),
    /** A task whose open turn holds a pending question, announced on the bus and visible in the summary. */
    async openQuestion() {
      const seeded = await w.session();
      const turn = await w.startTurn(seeded.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
      const bundle = await w.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: ['pending'] });
      const type = 'message.added';
      nc.publish(
        `${prefix}${type}`,
        envelope(type, { task_id: seeded.taskId, session_id: seeded.sessionId, type: 'clarification_request', requests_input: true }),
      );
      await eventually(
        async () => ((await storedPending(seeded.taskId))?.pending === 'clarification' ? true : undefined),
        10_000,
        'the question in the summary',
      );
      return { ...seeded, ...bundle, messageIds: bundle.messages.map((m) => m.id) };
    },
    async stop() {
      await worker.stop();
      await deleteTopology(nc, prefix);
      await workerDb.destroy();
      await t.close();
    },
  };
}

// On Kandev's schema the rows are Kandev's (raw, in its timestamp text), and the test reads through
// the context the service builds there; every assertion is the owned schema's.
describeEachSchemaAndDialect('clarification endpoints over a real NATS on %s', (dialect, schema) => {
  let t: TestDatabase;
  let ctx: RepositoryContext;
  let w: RowWriter;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let summaries: ReturnType<typeof collectSummaries>;
  let bus: ReturnType<typeof collectEvents>;

  const publish = (type: string, data: Record<string, unknown>) => nc.publish(`${prefix}${type}`, envelope(type, data));
  const storedPending = async (taskId: string) => {
    const stored = (await loadStatusSummaries(ctx, [taskId])).get(taskId);
    return stored ? { revision: stored.revision, pending: (JSON.parse(stored.summary) as { pending_action?: string }).pending_action } : undefined;
  };
  const rowsOf = (pendingId: string) => findMessagesByPendingId(ctx, pendingId);
  const eventsAbout = (messageIds: string[]) => bus.ofType(MESSAGE_UPDATED).filter((e) => messageIds.includes(String(e.data.message_id)));
  const eventsOfBundle = (pendingId: string) =>
    bus.events.filter((e) => e.data.pending_id === pendingId || (e.data.metadata as { pending_id?: unknown } | undefined)?.pending_id === pendingId);

  /** A task whose open turn holds a pending bundle, announced on the bus and visible in the summary. */
  async function openQuestion(questions = 1) {
    const seeded = await w.session();
    const turn = await w.startTurn(seeded.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
    const bundle = await w.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: Array(questions).fill('pending') });
    publish('message.added', { task_id: seeded.taskId, session_id: seeded.sessionId, type: 'clarification_request', requests_input: true });
    await eventually(async () => ((await storedPending(seeded.taskId))?.pending === 'clarification' ? true : undefined), 10_000, 'the question in the summary');
    return { ...seeded, turnId: turn.id, ...bundle, messageIds: bundle.messages.map((m) => m.id) };
  }

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema);
    nc = await connectTestNats();
    prefix = uniquePrefix(`clar_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    bus = collectEvents(nc, prefix, [MESSAGE_UPDATED, CLARIFICATION_PRIMARY_ANSWERED, CLARIFICATION_STALE_DISMISSED]);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { respondDeadlineMs: RESPOND_DEADLINE_MS }), logger: silentLogger() });
    ctx = await serviceContext(t, schema);
    w = rowWriter(schema, t.ctx);
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('spec AC-4: a question asked on the open turn after a lifecycle turn is listed, in the summary, and answerable', async () => {
    const { taskId, sessionId, workspaceId } = await w.session();
    const realTurn = await w.startTurn(sessionId, { startedAt: new Date(Date.now() - 800).toISOString() });
    // The resume path's boot message: the real write path creates the marked lifecycle turn, later.
    await w.message({ sessionId, type: 'script_execution', content: 'agent boot', completedTurn: true });
    const question = (id: string, flat: boolean, index: number) => ({
      pending_id: 'ac4-bundle',
      ...(flat ? { question_id: id } : {}),
      question: {
        id,
        title: id,
        prompt: `${id}?`,
        options: [
          { option_id: 'yes', label: 'Yes' },
          { option_id: 'no', label: 'No' },
        ],
      },
      question_index: index,
      question_total: 2,
      status: 'pending',
    });
    // Written like Kandev's getOrStartTurn: no explicit turn, so the open (real) turn owns them. The
    // second question carries only the nested question.id.
    const q1 = await w.message({ sessionId, type: 'clarification_request', metadata: question('q1', true, 0) });
    const q2 = await w.message({ sessionId, type: 'clarification_request', requestsInput: true, metadata: question('q2', false, 1) });
    expect([q1.turnId, q2.turnId]).toEqual([realTurn.id, realTurn.id]);
    publish('message.added', { task_id: taskId, session_id: sessionId, message_id: q2.id, type: 'clarification_request', requests_input: true });

    const listed = await client.listPending({ workspace_id: workspaceId, limit: 10 });
    expect(listed).toMatchObject({
      ok: true,
      next_cursor: null,
      bundles: [{ pending_id: 'ac4-bundle', turn_id: realTurn.id, session_id: sessionId, task_id: taskId }],
    });
    expect(listed.ok && listed.bundles[0]!.questions.map((q) => q.question_id)).toEqual(['q1', 'q2']);
    await eventually(
      () => (summaries.latest(taskId)?.status_summary.pending_action === 'clarification' ? true : undefined),
      10_000,
      'the summary to say clarification',
    );
    expect(await client.pendingActions({ task_id: taskId })).toMatchObject({
      ok: true,
      pending_action: 'clarification',
      sessions: [{ session_id: sessionId, pending_action: 'clarification' }],
    });
    expect(await client.guard({ session_id: sessionId })).toMatchObject({ ok: true, blocked: true, live: true });

    const turns = await client.turns({ session_id: sessionId });
    if (!turns.ok) throw new Error(turns.error.message);
    expect(turns.current_turn_id).toBe(realTurn.id);
    expect(turns.turns.find((turn) => turn.id !== realTurn.id)?.metadata).toMatchObject({ lifecycle_only: true });
    expect(newestDurableTurnId(turns.turns)).toBe(turns.current_turn_id);

    const seenDuringDelivery: unknown[] = [];
    const agent = startFakeAgent(nc, prefix, sessionId, {
      onDelivery: async (payload) => {
        // The claim committed before delivery; the rows are terminal but not finalised yet.
        seenDuringDelivery.push(...(await rowsOf(payload.pending_id)).map((r) => [r.metadata.status, r.metadata.response_delivery_pending]));
      },
    });
    try {
      const reply = await client.respond({
        pending_id: 'ac4-bundle',
        answers: [
          { question_id: 'q2', selected_options: ['no'] },
          { question_id: 'q1', selected_options: ['yes'], custom_text: ' ok ' },
        ],
      });
      expect(reply).toMatchObject({
        ok: true,
        claimed: true,
        delivery: 'live',
        status: 'answered',
        answers: [
          { question_id: 'q1', selected_options: ['yes'], custom_text: 'ok' },
          { question_id: 'q2', selected_options: ['no'], custom_text: '' },
        ],
      });
      expect(agent.deliveries).toHaveLength(1);
      expect(agent.deliveries[0]).toMatchObject({ pending_id: 'ac4-bundle', clarification_turn_id: realTurn.id, session_id: sessionId, task_id: taskId });
      expect(seenDuringDelivery).toEqual([
        ['answered', true],
        ['answered', true],
      ]);
      const rows = await rowsOf('ac4-bundle');
      expect(rows.map((r) => [r.metadata.status, r.metadata.response_delivery_pending, r.metadata.response])).toEqual([
        ['answered', undefined, { question_id: 'q1', selected_options: ['yes'], custom_text: 'ok' }],
        ['answered', undefined, { question_id: 'q2', selected_options: ['no'], custom_text: '' }],
      ]);
      await eventually(() => (eventsAbout([q1.id, q2.id]).length === 2 ? true : undefined), 5000, 'message.updated per row');
      await eventually(() => bus.ofType(CLARIFICATION_PRIMARY_ANSWERED).find((e) => e.data.pending_id === 'ac4-bundle'), 5000, 'primary_answered');
      expect(bus.ofType(CLARIFICATION_PRIMARY_ANSWERED).find((e) => e.data.pending_id === 'ac4-bundle')?.data).toEqual({
        pending_id: 'ac4-bundle',
        session_id: sessionId,
        task_id: taskId,
        clarification_turn_id: realTurn.id,
        question: 'q1?\nq2?',
        answer_text: 'q1?: Yes, ok\nq2?: No',
        rejected: false,
        reject_reason: '',
        status: 'answered',
      });
      await eventually(async () => ((await storedPending(taskId))?.pending === undefined ? true : undefined), 10_000, 'the summary to clear');
    } finally {
      agent.stop();
    }
  });

  it('restores a bundle whose live waiter never confirms, and the retry succeeds', async () => {
    const q = await openQuestion(2);
    const agent = startFakeAgent(nc, prefix, q.sessionId, { mode: 'silent' });
    try {
      const first = await client.respond({ pending_id: q.pendingId, answers: answers('a', 'b') });
      expect(first).toMatchObject({ ok: false, error: { code: 'retryable', message: expect.stringMatching(/did not confirm/) } });
      // At reply time the bundle is pending again and the summary already says so.
      expect((await rowsOf(q.pendingId)).map((r) => [r.metadata.status, r.metadata.response, r.metadata.response_delivery_pending])).toEqual([
        ['pending', undefined, undefined],
        ['pending', undefined, undefined],
      ]);
      expect((await storedPending(q.taskId))?.pending).toBe('clarification');
      const listed = await client.listPending({ workspace_id: q.workspaceId, limit: 5 });
      expect(listed.ok && listed.bundles.map((b) => b.pending_id)).toEqual([q.pendingId]);

      agent.mode = 'confirm';
      const retry = await client.respond({ pending_id: q.pendingId, answers: answers('a', 'b') });
      expect(retry).toMatchObject({ ok: true, claimed: true, delivery: 'live' });
      expect(agent.deliveries).toHaveLength(2);
      expect(agent.deliveries[0]!.claim_id).not.toBe(agent.deliveries[1]!.claim_id);
      expect((await rowsOf(q.pendingId)).every((r) => r.metadata.status === 'answered' && r.metadata.response_delivery_pending === undefined)).toBe(true);
    } finally {
      agent.stop();
    }
  });

  it('a live waiter that refuses is "not confirmed" too', async () => {
    const q = await openQuestion();
    const agent = startFakeAgent(nc, prefix, q.sessionId, { mode: 'refuse' });
    try {
      expect(await client.respond({ pending_id: q.pendingId, answers: answers('a') })).toMatchObject({ ok: false, error: { code: 'retryable' } });
      expect((await rowsOf(q.pendingId))[0]!.metadata.status).toBe('pending');
    } finally {
      agent.stop();
    }
  });

  it('replies retryable to a detached answer whose resume is never acknowledged only once the summary shows clarification again', async () => {
    // A worker of its own on a second pool: reads through the describe's database would queue behind
    // the worker's projection on SQLite's one connection and could only ever see it committed.
    const own = await startWorkerOnSecondPool(dialect, schema, nc);
    try {
      const q = await own.openQuestion();
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(own.worker.topology.agentResumeStream);
      // What the summary said when the restored row's message.updated reached the bus: the refresh
      // must have committed before, not be a consequence of it.
      const sub = nc.subscribe(`${own.prefix}${MESSAGE_UPDATED}`);
      const summaryAtRestoreEvent = (async () => {
        for await (const m of sub) {
          const data = m.json<{ data: { message_id: string; metadata: { status?: string } } }>().data;
          if (data.message_id === q.messageIds[0] && data.metadata.status === 'pending') return own.storedPending(q.taskId);
        }
        return undefined;
      })();
      try {
        const reply = own.client.respond({ pending_id: q.pendingId, answers: answers('b') });
        // While the resume waits for an acknowledgement, a projection sees the claimed (answered) rows.
        await eventually(async () => ((await own.rowsOf(q.pendingId))[0]!.metadata.status === 'answered' ? true : undefined), 5000, 'the claim');
        await own.worker.projector.reproject(q.taskId);
        const cleared = await own.storedPending(q.taskId);
        expect(cleared?.pending).toBeUndefined();

        const result = await reply;
        const atReply = await own.storedPending(q.taskId);
        expect(result).toMatchObject({ ok: false, error: { code: 'retryable', message: expect.stringMatching(/not acknowledged within 1500 ms/) } });
        expect(atReply).toEqual({ revision: cleared!.revision + 1, pending: 'clarification' });
        expect(await summaryAtRestoreEvent).toEqual(atReply);
        expect((await own.rowsOf(q.pendingId))[0]!.metadata).toMatchObject({ status: 'pending' });
      } finally {
        sub.unsubscribe();
        await ensureTopology(nc, { topology: own.worker.topology, streamMaxAgeMs: 3_600_000, maxDeliver: 5, ackWaitMs: 5000 });
      }
      const retry = await own.client.respond({ pending_id: q.pendingId, answers: answers('b') });
      expect(retry).toMatchObject({ ok: true, claimed: true, delivery: 'resume', status: 'answered' });
      const stored = await jsm.streams.getMessage(own.worker.topology.agentResumeStream, { last_by_subj: own.worker.topology.agentResumeSubject(q.sessionId) });
      const resume = stored!.json<{ id: string; type: string; data: { pending_id: string; claim_id: string; answers: unknown } }>();
      expect(resume).toMatchObject({
        type: 'clarification.resume',
        data: { pending_id: q.pendingId, answers: [{ question_id: 'q1', selected_options: ['b'] }] },
      });
      expect(stored!.header.get('Nats-Msg-Id')).toBe(resumeMsgId(q.pendingId, resume.data.claim_id));
      expect((await own.rowsOf(q.pendingId))[0]!.metadata).toMatchObject({ status: 'answered' });
      await eventually(async () => ((await own.storedPending(q.taskId))?.pending === undefined ? true : undefined), 10_000, 'the summary to clear');
    } finally {
      await own.stop();
    }
  });

  it('replies internal, never retryable, when the summary refresh after a restore exhausts its compare-and-set retries', async () => {
    const q = await openQuestion();
    // Our own port, throwing what the real projector throws on exhaustion; the delivery is real NATS
    // with no stream capturing the resume subject, so the deadline passes.
    const service = createClarificationService({
      store: createClarificationStore(ctx),
      delivery: new NatsClarificationDelivery(nc, topologyFor(uniquePrefix('nostream')), t.ctx.clock),
      events: new NatsEventPublisher(nc, worker.topology, t.ctx.clock),
      refreshSummary: async (taskId) => {
        throw new ConflictExhaustedError(taskId, 3);
      },
      respondDeadlineMs: 300,
      logger: silentLogger(),
    });
    const reply = await service.respond({ pending_id: q.pendingId, answers: answers('a') });
    expect(reply).toMatchObject({
      ok: false,
      error: { code: 'internal', message: expect.stringMatching(/could not be refreshed.*compare-and-set lost 3 times.*not acknowledged as retryable/) },
    });
    expect((await rowsOf(q.pendingId))[0]!.metadata.status).toBe('pending');
  });

  it('persists a detached rejection without any resume and publishes clarification.stale_dismissed', async () => {
    const q = await openQuestion();
    const reply = await client.respond({ pending_id: q.pendingId, reject: { reason: 'not relevant any more' } });
    expect(reply).toMatchObject({ ok: true, claimed: true, delivery: 'none', status: 'rejected', reject_reason: 'not relevant any more', answers: [] });
    expect((await rowsOf(q.pendingId))[0]!.metadata).toMatchObject({ status: 'rejected', reject_reason: 'not relevant any more' });
    expect((await rowsOf(q.pendingId))[0]!.metadata.response_delivery_pending).toBeUndefined();
    await eventually(() => bus.ofType(CLARIFICATION_STALE_DISMISSED).find((e) => e.data.pending_id === q.pendingId), 5000, 'stale_dismissed');
    const jsm = await jetstreamManager(nc);
    expect(await jsm.streams.getMessage(worker.topology.agentResumeStream, { last_by_subj: worker.topology.agentResumeSubject(q.sessionId) })).toBeNull();
    await eventually(async () => ((await storedPending(q.taskId))?.pending === undefined ? true : undefined), 10_000, 'the summary to clear');

    // A retry of the same rejection replays it; a different outcome is a conflict.
    const replay = await client.respond({ pending_id: q.pendingId, reject: { reason: 'not relevant any more' } });
    expect(replay).toMatchObject({ ok: true, claimed: false, status: 'rejected', delivery: null });
    expect(await client.respond({ pending_id: q.pendingId, answers: answers('a') })).toMatchObject({ ok: false, error: { code: 'conflict' } });
  });

  it('replays the recorded answer to a retry of the same answer, for that bundle only', async () => {
    const q = await openQuestion(2);
    const agent = startFakeAgent(nc, prefix, q.sessionId);
    try {
      const won = await client.respond({ pending_id: q.pendingId, answers: answers('a', 'b') });
      expect(won).toMatchObject({ ok: true, claimed: true });
      await eventually(() => (eventsOfBundle(q.pendingId).length === 3 ? true : undefined), 5000, 'two message.updated and primary_answered');
      const replay = await client.respond({ pending_id: q.pendingId, answers: [answers('a', 'b')[1]!, answers('a', 'b')[0]!] });
      expect(replay).toMatchObject({ ok: true, claimed: false, status: 'answered', delivery: null, answers: won.ok ? won.answers : [] });
      expect(replay.ok && replay.responded_at).toBe(won.ok && won.responded_at);
      expect(await client.respond({ pending_id: q.pendingId, answers: answers('b', 'b') })).toMatchObject({
        ok: false,
        error: { code: 'conflict', message: expect.stringMatching(/different response/) },
      });
      // Another bundle answered identically is not a replay of this one.
      const other = await openQuestion(2);
      await w.completeTurn(other.turnId);
      await w.startTurn(other.sessionId);
      expect(await client.respond({ pending_id: other.pendingId, answers: answers('a', 'b') })).toMatchObject({ ok: false, error: { code: 'conflict' } });
      expect(agent.deliveries).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 200));
      expect(eventsOfBundle(q.pendingId)).toHaveLength(3);
      expect(eventsOfBundle(other.pendingId)).toEqual([]);
    } finally {
      agent.stop();
    }
  });

  it('answers conflict with no write and no event for a superseded, terminal or expired bundle', async () => {
    const superseded = await openQuestion();
    await w.completeTurn(superseded.turnId);
    await w.startTurn(superseded.sessionId);
    const terminal = await openQuestion();
    await w.setSessionState(terminal.sessionId, 'COMPLETED');
    const expired = await openQuestion();
    const expiry = await client.expire({ session_id: expired.sessionId });
    expect(expiry).toEqual({ ok: true, session_id: expired.sessionId, expired_pending_ids: [expired.pendingId], expired_message_ids: expired.messageIds });
    await eventually(() => (eventsAbout(expired.messageIds).length === 1 ? true : undefined), 5000, 'message.updated of the expired row');
    expect((await rowsOf(expired.pendingId))[0]!.metadata).toMatchObject({ status: 'expired', agent_disconnected: true });

    for (const q of [superseded, terminal, expired]) {
      const before = await rowsOf(q.pendingId);
      const agent = startFakeAgent(nc, prefix, q.sessionId);
      try {
        const reply = await client.respond({ pending_id: q.pendingId, answers: answers('a') });
        expect(reply).toMatchObject({ ok: false, error: { code: 'conflict' } });
        expect(agent.deliveries).toEqual([]);
      } finally {
        agent.stop();
      }
      expect(await rowsOf(q.pendingId)).toEqual(before);
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(eventsAbout([...superseded.messageIds, ...terminal.messageIds])).toEqual([]);
    expect(eventsAbout(expired.messageIds)).toHaveLength(1);
  });

  it('guards only on the current turn: an older-turn question does not block, a detached current one blocks but is not live', async () => {
    const older = await openQuestion();
    await w.completeTurn(older.turnId);
    await w.startTurn(older.sessionId);
    expect(await client.guard({ session_id: older.sessionId })).toEqual({
      ok: true,
      session_id: older.sessionId,
      blocked: false,
      live: false,
      pending_ids: [],
    });

    const current = await openQuestion(2);
    expect(await client.guard({ session_id: current.sessionId })).toMatchObject({ ok: true, blocked: true, live: true });
    const detached = await client.detach({ session_id: current.sessionId });
    expect(detached).toEqual({ ok: true, session_id: current.sessionId, detached_message_ids: current.messageIds, pending_ids: [current.pendingId] });
    expect(await client.guard({ session_id: current.sessionId })).toEqual({
      ok: true,
      session_id: current.sessionId,
      blocked: true,
      live: false,
      pending_ids: [current.pendingId],
    });
    await eventually(() => (eventsAbout(current.messageIds).length === 2 ? true : undefined), 5000, 'message.updated per detached row');

    // A repeat writes nothing and publishes nothing.
    const rows = await rowsOf(current.pendingId);
    expect(await client.detach({ session_id: current.sessionId })).toMatchObject({ ok: true, detached_message_ids: [], pending_ids: [] });
    await new Promise((r) => setTimeout(r, 200));
    expect(await rowsOf(current.pendingId)).toEqual(rows);
    expect(eventsAbout(current.messageIds)).toHaveLength(2);
    // Still answerable while its turn is current; the answer becomes a resume command.
    expect(await client.respond({ pending_id: current.pendingId, answers: answers('a', 'a') })).toMatchObject({ ok: true, claimed: true, delivery: 'resume' });
  });

  it('fails the guard closed when the database cannot answer, and when no worker answers', async () => {
    const broken = await openTestDatabase(dialect);
    await broken.close();
    const service = createClarificationService({
      store: createClarificationStore(broken.ctx),
      delivery: new NatsClarificationDelivery(nc, worker.topology, t.ctx.clock),
      events: new NatsEventPublisher(nc, worker.topology, t.ctx.clock),
      refreshSummary: async () => undefined,
      respondDeadlineMs: 300,
      logger: silentLogger(),
    });
    // The service rejects; the endpoint replies to that with the guard's failure fields (serviceEndpoint.test.ts).
    await expect(service.guard({ session_id: 'any' })).rejects.toThrow();
    const nobody = createPendingProjectorClient(nc, { prefix: uniquePrefix('nobody'), timeoutMs: 500 });
    expect(await nobody.guard({ session_id: 'any' })).toMatchObject({ ok: false, error: { code: 'unavailable' }, blocked: true });
  });

  it('refuses bad requests with bad_request or not_found and writes nothing', async () => {
    const q = await openQuestion(2);
    const before = await rowsOf(q.pendingId);
    const subject = worker.topology.serviceSubject('clarification.respond');
    const raw = async (body: string | Uint8Array) =>
      (await nc.request(subject, body, { timeout: 5000 })).json<{ ok: boolean; error?: { code: string; message: string } }>();
    expect(await client.respond({ pending_id: 'no-such-bundle', answers: answers('a') })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await client.respond({ pending_id: q.pendingId, answers: answers('a', 'zz') })).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: 'answer 2 selects unknown option_id "zz" for question "q2"; its options are "a", "b"' },
    });
    expect(await client.respond({ pending_id: q.pendingId, answers: answers('a') })).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: expect.stringMatching(/missing "q2"/) },
    });
    expect(await client.respond({ pending_id: q.pendingId, answers: answers('a', 'a', 'a', 'a', 'a') })).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: expect.stringMatching(/at most 4 answers/) },
    });
    expect(await client.respond({ pending_id: q.pendingId, answers: [{ question_id: 'q7', selected_options: ['a'] }, ...answers('a')] })).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: expect.stringMatching(/unknown question_id "q7"/) },
    });
    expect(await raw(JSON.stringify({ pending_id: q.pendingId, answers: answers('a', 'b'), reject: { reason: 'x' } }))).toMatchObject({
      ok: false,
      error: { code: 'bad_request' },
    });
    expect(await raw('{"pending_id": ')).toMatchObject({ ok: false, error: { code: 'bad_request', message: expect.stringMatching(/invalid JSON/) } });
    expect(await raw(JSON.stringify({ pending_id: q.pendingId, answers: answers('a', 'b'), padding: 'x'.repeat(70 * 1024) }))).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: expect.stringMatching(/exceeds/) },
    });
    expect(await client.detach({ session_id: 'no-such-session' })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await client.turns({ session_id: 'no-such-session' })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await client.pendingActions({ task_id: 'no-such-task' })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await client.listPending({ limit: 2, cursor: 'garbage' })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listPending({ limit: 0 })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listPending({ limit: 2, created_since: 'yesterday' })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await rowsOf(q.pendingId)).toEqual(before);
  });

  it('lists pending bundles page by page, each page filled to its limit while more exist', async () => {
    const { workspaceId } = await w.session();
    const pendingIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { sessionId } = await w.session({ workspaceId });
      const turn = await w.startTurn(sessionId);
      pendingIds.push((await w.bundle({ sessionId, turnId: turn.id, createdAt: `2026-01-0${i + 1}T00:00:00Z` })).pendingId);
    }
    // A superseded bundle in the same workspace is filtered before the LIMIT.
    const hidden = await w.session({ workspaceId });
    const oldTurn = await w.startTurn(hidden.sessionId);
    await w.bundle({ sessionId: hidden.sessionId, turnId: oldTurn.id, createdAt: '2025-12-31T00:00:00Z' });
    await w.completeTurn(oldTurn.id);
    await w.startTurn(hidden.sessionId);

    const first = await client.listPending({ workspace_id: workspaceId, limit: 2 });
    if (!first.ok) throw new Error(first.error.message);
    expect(first.bundles.map((b) => b.pending_id)).toEqual(pendingIds.slice(0, 2));
    expect(first.next_cursor).not.toBeNull();
    const second = await client.listPending({ workspace_id: workspaceId, limit: 2, cursor: first.next_cursor! });
    expect(second).toMatchObject({ ok: true, next_cursor: null, bundles: [{ pending_id: pendingIds[2] }] });
    expect(await client.listPending({ workspace_id: workspaceId, limit: 5, created_since: '2026-01-02T00:00:00Z' })).toMatchObject({
      ok: true,
      bundles: [{ pending_id: pendingIds[1] }, { pending_id: pendingIds[2] }],
    });
  });

  it('reports per-session pending actions of a task and the task-level value', async () => {
    const { taskId, sessionId } = await w.session();
    const second = await w.addSession({ taskId, isPrimary: false });
    const turn = await w.startTurn(second.id);
    await w.bundle({ sessionId: second.id, turnId: turn.id });
    await w.startTurn(sessionId);
    const reply = await client.pendingActions({ task_id: taskId });
    if (!reply.ok) throw new Error(reply.error.message);
    expect(reply.pending_action).toBe('clarification');
    expect(reply.sessions).toEqual(
      expect.arrayContaining([
        { session_id: sessionId, state: 'RUNNING', is_primary: true, pending_action: null },
        { session_id: second.id, state: 'RUNNING', is_primary: false, pending_action: 'clarification' },
      ]),
    );
  });

  it('keeps summary.get and task.reproject working', async () => {
    const q = await openQuestion();
    expect(await client.reproject({ task_id: q.taskId })).toEqual({ ok: true, task_id: q.taskId });
    expect(await client.getSummary({ task_id: q.taskId })).toMatchObject({ ok: true, task_id: q.taskId, status_summary: { pending_action: 'clarification' } });
  });
});
