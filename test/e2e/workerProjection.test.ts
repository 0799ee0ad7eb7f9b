import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topologyFor } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../../src/repository/clarifications/clarificationClaims.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { PENDING_ACTION_EPOCH_KEY } from '../../src/repository/projection/meta.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import type { TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, serviceContext, type RowWriter } from '../support/rowWriters.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// On Kandev's schema the rows are Kandev's (raw, in its timestamp text), and the test reads and
// claims through the context the service builds there; every assertion is the owned schema's.
describeEachSchemaAndDialect('the worker over a real NATS on %s', (dialect, schema) => {
  let t: TestDatabase;
  let ctx: RepositoryContext;
  let w: RowWriter;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let summaries: ReturnType<typeof collectSummaries>;

  const publish = (type: string, data: Record<string, unknown>) => nc.publish(`${prefix}${type}`, envelope(type, data));
  /** Every published event acknowledged and no projection running (earlier tests' tails included). */
  const drained = async () => {
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const jsm = await jetstreamManager(nc);
    await eventually(
      async () => {
        const info = await jsm.consumers.info(worker.topology.eventsStream, worker.topology.consumer);
        return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
      },
      20_000,
      'the consumer to drain',
    );
    await worker.projector.whenIdle();
  };
  const projections = async () => {
    const metric = await worker.metrics.projections.get();
    return metric.values.reduce((sum, v) => sum + v.value, 0);
  };

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema);
    nc = await connectTestNats();
    prefix = uniquePrefix(`proj_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { bootReconcile: true }), logger: silentLogger() });
    await worker.bootReconcile;
    ctx = await serviceContext(t, schema);
    w = rowWriter(schema, t.ctx);
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('keeps a question asked on the open turn visible after the resume path writes a lifecycle turn (spec incident)', async () => {
    const { taskId, sessionId } = await w.session();
    const realTurn = await w.turnAt(sessionId, { startedAt: new Date(Date.now() - 800).toISOString() });
    const boot = await w.message({ sessionId, type: 'script_execution', content: 'boot', completedTurn: true });
    publish('message.added', { task_id: taskId, session_id: sessionId, message_id: boot.id, type: 'script_execution' });
    const { messages } = await w.bundle({ sessionId, turnId: realTurn });
    publish('message.added', { task_id: taskId, session_id: sessionId, message_id: messages[0]!.id, type: 'clarification_request', requests_input: true });
    const latest = await eventually(() => (summaries.latest(taskId)?.status_summary.pending_action === 'clarification' ? summaries.latest(taskId) : undefined));
    expect(latest.workspace_id).not.toBe('');
    // The summary is published before its transaction commits: read the row once that projection is done.
    await worker.projector.whenIdle();
    const stored = (await loadStatusSummaries(ctx, [taskId])).get(taskId)!;
    expect(stored.revision).toBe(latest.status_summary.revision);
    expect(JSON.parse(stored.summary)).toEqual({ pending_action: 'clarification' });
  });

  it('clears pending_action when the question is answered and advances the revision by one', async () => {
    const { taskId, sessionId } = await w.session();
    const turn = await w.turnAt(sessionId, { startedAt: new Date().toISOString() });
    const { pendingId, messages } = await w.bundle({ sessionId, turnId: turn });
    publish('message.added', { task_id: taskId, session_id: sessionId, type: 'clarification_request' });
    const armed = await eventually(() => summaries.forTask(taskId).find((e) => e.status_summary.pending_action === 'clarification'));
    const claim = await claimClarificationBundle(ctx, pendingId, { status: 'rejected' });
    expect(claim.claimed).toBe(true);
    await finalizeClarificationDelivery(
      ctx,
      messages.map((m) => m.id),
    );
    publish('message.updated', { session_id: sessionId, message_id: messages[0]!.id, type: 'clarification_request' });
    const cleared = await eventually(() => summaries.forTask(taskId).find((e) => e.status_summary.revision > armed.status_summary.revision));
    expect(cleared.status_summary.revision).toBe(armed.status_summary.revision + 1);
    expect(cleared.status_summary.pending_action).toBeUndefined();
  });

  it('costs no projection for streaming updates of ordinary messages', async () => {
    const { taskId, sessionId } = await w.session();
    publish('task.created', { task_id: taskId });
    await eventually(() => summaries.latest(taskId));
    await drained();
    const before = await projections();
    for (let i = 0; i < 20; i++) publish('message.updated', { task_id: taskId, session_id: sessionId, type: 'message', requests_input: false });
    publish('task.updated', { task_id: taskId });
    await nc.flush();
    await eventually(async () => ((await projections()) > before ? true : undefined));
    await drained();
    // Only the task.updated produced a projection; the 20 streaming updates were acked unread.
    expect((await projections()) - before).toBe(1);
  });

  it('preserves summary fields it does not own and replaces only the ones it owns (pending_action, queued_prompt_count)', async () => {
    const { taskId, sessionId, workspaceId } = await w.session();
    await w.summary({
      taskId,
      workspaceId,
      revision: 7,
      summary: JSON.stringify({ git: { additions: 3, deletions: 1 }, active_subagent_count: 2, queued_prompt_count: 2, pending_action: 'permission' }),
      updatedAt: '2026-01-01T00:00:00.000000000Z',
    });
    publish('task_session.state_changed', { task_id: taskId, session_id: sessionId, state: 'RUNNING' });
    const next = await eventually(() => summaries.latest(taskId));
    expect(next.status_summary).toMatchObject({ revision: 8, git: { additions: 3, deletions: 1 }, active_subagent_count: 2 });
    // Nothing is queued for the task: the count the worker owns is omitted at 0 (queuedPromptCount.test.ts counts).
    expect(next.status_summary.queued_prompt_count).toBeUndefined();
    expect(next.status_summary.pending_action).toBeUndefined();
  });

  it('converges on the database state whatever the order and duplication of events, with strictly increasing revisions', async () => {
    const { taskId, sessionId } = await w.session();
    const turn = await w.turnAt(sessionId, { startedAt: new Date().toISOString() });
    await w.message({ sessionId, turnId: turn, type: 'permission_request', metadata: { pending_id: 'perm-1' } });
    const events = ['message.added', 'turn.started', 'message.added', 'task.updated', 'message.added'];
    for (const type of [...events, ...events.reverse()]) publish(type, { task_id: taskId, session_id: sessionId, type: 'permission_request' });
    await eventually(() => (summaries.latest(taskId)?.status_summary.pending_action === 'permission' ? true : undefined));
    await worker.projector.whenIdle();
    const revisions = summaries.forTask(taskId).map((e) => e.status_summary.revision);
    expect(revisions).toEqual([...revisions].sort((a, b) => a - b));
    expect(new Set(revisions).size).toBe(revisions.length);
  });

  it('coalesces a burst of 1,000 events for one task into a handful of projections', async () => {
    const { taskId, sessionId } = await w.session();
    const turn = await w.turnAt(sessionId, { startedAt: new Date().toISOString() });
    await w.bundle({ sessionId, turnId: turn });
    const before = await projections();
    for (let i = 0; i < 1000; i++) publish('message.added', { task_id: taskId, session_id: sessionId, type: 'clarification_request' });
    await nc.flush();
    await eventually(
      async () => {
        const info = await (
          await import('@nats-io/jetstream')
        )
          .jetstreamManager(nc)
          .then((jsm) => jsm.consumers.info(worker.topology.eventsStream, worker.topology.consumer));
        return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
      },
      20_000,
      'the burst to be acknowledged',
    );
    const used = (await projections()) - before;
    expect(used).toBeGreaterThanOrEqual(1);
    expect(used).toBeLessThan(60);
    expect(summaries.latest(taskId)?.status_summary.pending_action).toBe('clarification');
  });

  it('resolves the task from session_id when an event carries no task_id', async () => {
    const { taskId, sessionId } = await w.session();
    const turn = await w.turnAt(sessionId, { startedAt: new Date().toISOString() });
    await w.bundle({ sessionId, turnId: turn });
    publish('message.added', { session_id: sessionId, type: 'clarification_request' });
    await eventually(() => (summaries.latest(taskId)?.status_summary.pending_action === 'clarification' ? true : undefined));
  });

  it("publishes each session's pending action under this boot's epoch, its sequence increasing, without a message id", async () => {
    const seen: Array<{ subject: string; msgId: string | undefined; envelope: { type: string; source: string; data: Record<string, unknown> } }> = [];
    const sub = nc.subscribe(`${prefix}session.pending_action_changed`, {
      callback: (_err, m) => {
        seen.push({ subject: m.subject, msgId: m.headers?.get('Nats-Msg-Id') || undefined, envelope: m.json() });
      },
    });
    try {
      await nc.flush();
      const { taskId, sessionId } = await w.session();
      const turn = await w.turnAt(sessionId, { startedAt: new Date().toISOString() });
      const { pendingId, messages } = await w.bundle({ sessionId, turnId: turn });
      publish('message.added', { task_id: taskId, session_id: sessionId, type: 'clarification_request' });
      const ofSession = () => seen.filter((e) => e.envelope.data.session_id === sessionId);
      const asked = await eventually(() => ofSession().find((e) => e.envelope.data.pending_action === 'clarification'));
      const meta = await t.ctx.knex('kandev_meta').where({ key: PENDING_ACTION_EPOCH_KEY }).first();
      expect(asked.subject).toBe(`${prefix}session.pending_action_changed`);
      expect(asked.envelope).toMatchObject({ type: 'session.pending_action_changed', source: 'pending-projector' });
      // Kandev's payload: its web handler drops one without workspace_id; the epoch is a string.
      const { workspace_id: workspaceId } = await t.ctx.knex('tasks').select('workspace_id').where({ id: taskId }).first();
      expect(asked.envelope.data).toMatchObject({ workspace_id: workspaceId, task_id: taskId, pending_action_revision: { epoch: meta.value } });
      expect(typeof (asked.envelope.data.pending_action_revision as { epoch: unknown }).epoch).toBe('string');
      // The sequence orders one boot's publishes; no retry ever repeats one, so a msg id would only
      // fill the stream's duplicate window.
      expect(asked.msgId).toBeUndefined();

      await claimClarificationBundle(ctx, pendingId, { status: 'rejected' });
      await finalizeClarificationDelivery(
        ctx,
        messages.map((m) => m.id),
      );
      publish('message.updated', { session_id: sessionId, message_id: messages[0]!.id, type: 'clarification_request' });
      const cleared = await eventually(() => ofSession().find((e) => e.envelope.data.pending_action === null));
      const revision = (e: typeof asked) => e.envelope.data.pending_action_revision as { epoch: string; sequence: number };
      expect(revision(cleared).epoch).toBe(meta.value);
      expect(revision(cleared).sequence).toBeGreaterThan(revision(asked).sequence);
    } finally {
      sub.unsubscribe();
    }
  });

  it('answers summary.get from the database and keeps the latest summary in the KV bucket', async () => {
    const { taskId, sessionId } = await w.session();
    publish('task_session.state_changed', { task_id: taskId, session_id: sessionId });
    const published = await eventually(() => summaries.latest(taskId));
    // The summary reaches the bus before its COMMIT (ADR 0004): the stored row follows a moment later.
    const stored = await eventually(async () => {
      const reply = await nc.request(topologyFor(prefix).serviceSubject('summary.get'), JSON.stringify({ task_id: taskId }), { timeout: 5000 });
      const body = reply.json<{ ok: boolean }>();
      return body.ok ? body : undefined;
    });
    expect(stored).toEqual({ ok: true, task_id: taskId, workspace_id: published.workspace_id, status_summary: published.status_summary });
    const missing = await nc.request(topologyFor(prefix).serviceSubject('summary.get'), JSON.stringify({ task_id: 'no-such-task' }), { timeout: 5000 });
    expect(missing.json()).toMatchObject({ ok: false, error: { code: 'not_found' } });
    const bad = await nc.request(topologyFor(prefix).serviceSubject('summary.get'), '{not json', { timeout: 5000 });
    expect(bad.json()).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    const { Kvm } = await import('@nats-io/kv');
    const kv = await new Kvm(nc).open(topologyFor(prefix).summaryBucket);
    const entry = await kv.get(taskId);
    expect((entry?.json() as { data: unknown }).data).toEqual(published);
  });
});
