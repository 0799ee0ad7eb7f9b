import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { MESSAGE_QUEUE_STATUS_CHANGED } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { rawRows, beginOrJoin, type RepositoryContext } from '../../src/repository/context.js';
import { createPromptStore, openPromptStore } from '../../src/repository/prompts/promptStore.js';
import { instantAfter } from '../../src/timestamps.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import type { TestDatabase } from '../support/databases.js';
import { createKandevPlanTables } from '../support/kandevPlanSchema.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, serviceContext, type RowWriter } from '../support/rowWriters.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, LOG_LEVEL: 'warn' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * The summary's `queued_prompt_count`, which the projector owns (design Q5, C1), through a real
 * worker: an enqueue's `message.queue.status_changed` reprojects the task. In owned mode the queue
 * is `queued_messages` with this service's receipt columns; beside Kandev's (newer) schema it is
 * Kandev's own `queued_messages` (no receipt columns) plus this service's receipts in
 * `pending_projector_prompt_receipts`. Rows written the way Kandev writes them go to
 * `queued_messages` in both modes, with metadata Kandev flags in flight or another producer broke.
 *
 * The worker's prompt dispatcher runs, and would deliver the receipts of a promptable session: the
 * sessions counted here are RUNNING (the agent works while prompts queue), which it leaves alone.
 */
describeEachSchemaAndDialect('queued_prompt_count in the task summary on %s', (dialect, schema) => {
  let t: TestDatabase;
  let ctx: RepositoryContext;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let summaries: ReturnType<typeof collectSummaries>;
  let bus: ReturnType<typeof collectEvents>;
  let w: RowWriter;
  const receiptTable = schema === 'owned' ? 'queued_messages' : 'pending_projector_prompt_receipts';

  const stored = async (taskId: string) => {
    const reply = await client.getSummary({ task_id: taskId });
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    return (reply as unknown as { status_summary: Record<string, unknown> }).status_summary;
  };
  const reprojected = async (taskId: string) => {
    expect(await client.reproject({ task_id: taskId })).toMatchObject({ ok: true });
    return stored(taskId);
  };

  /** A queue row as Kandev's backend writes one: its queue columns only. */
  async function kandevQueueRow(sessionId: string, taskId: string, position: number, metadataJson: string): Promise<string> {
    const id = randomUUID();
    await ctx.knex('queued_messages').insert({
      id,
      session_id: sessionId,
      task_id: taskId,
      position,
      content: `kandev ${position}`,
      metadata_json: metadataJson,
      queued_at: '2026-09-01 10:00:00',
      queued_by: 'user',
    });
    return id;
  }

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema, { file: true });
    if (schema === 'kandev') await createKandevPlanTables(t.db);
    nc = await connectTestNats();
    prefix = uniquePrefix(`qcount_${dialect}_${schema}`);
    summaries = collectSummaries(nc, prefix);
    bus = collectEvents(nc, prefix, [MESSAGE_QUEUE_STATUS_CHANGED]);
    // A reservation TTL longer than the file: the worker's receipt reconciliation runs at start only,
    // so the reservation states a test writes by hand (expired ones too) stay as written.
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { reservationTtlMs: 600_000 }), logger: silentLogger() });
    ctx = await serviceContext(t, schema);
    w = rowWriter(schema, ctx);
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it.each([
    ['reserved, not durable', '{"lifecycle_reserved_in_flight": true}', true],
    ['durable and reserved', '{"lifecycle_durable_until_accepted": true, "lifecycle_reserved_in_flight": true}', false],
    ['a PR automation row, reserved', '{"origin": "github_pr_automation", "lifecycle_reserved_in_flight": true}', false],
    ['another origin, reserved', '{"origin": "user", "lifecycle_reserved_in_flight": true}', true],
    ['durable, reserved as the string "true"', '{"lifecycle_durable_until_accepted": true, "lifecycle_reserved_in_flight": "true"}', true],
    ['durable as 1, reserved', '{"lifecycle_durable_until_accepted": 1, "lifecycle_reserved_in_flight": true}', true],
    ['durable, reserved as 1', '{"lifecycle_durable_until_accepted": true, "lifecycle_reserved_in_flight": 1}', true],
    ['durable, not reserved', '{"lifecycle_durable_until_accepted": true}', true],
    ['durable, reserved false', '{"lifecycle_durable_until_accepted": true, "lifecycle_reserved_in_flight": false}', true],
  ])('a Kandev queue row %s counts exactly when Kandev calls it waiting', async (_, metadataJson, waits) => {
    const { taskId, sessionId } = await w.session({ state: 'RUNNING' });
    await kandevQueueRow(sessionId, taskId, 1, '{}');
    await kandevQueueRow(sessionId, taskId, 2, metadataJson);
    const summary = await reprojected(taskId);
    expect(summary.queued_prompt_count).toBe(waits ? 2 : 1);
  });

  it('counts the waiting queued prompts of every session, never a direct receipt, a reserved or attempted one, or a row Kandev flagged in flight; omitted at 0', async () => {
    const { taskId, sessionId } = await w.session({ state: 'RUNNING' });
    const other = await w.addSession({ taskId, state: 'RUNNING', isPrimary: false });
    const kandevRows = [
      await kandevQueueRow(sessionId, taskId, 1, ''),
      await kandevQueueRow(sessionId, taskId, 2, 'not json {'),
      await kandevQueueRow(sessionId, taskId, 3, '[1, 2]'),
      await kandevQueueRow(other.id, taskId, 1, '{"lifecycle_durable_until_accepted": true, "lifecycle_reserved_in_flight": true}'),
      await kandevQueueRow(other.id, taskId, 2, '{"origin": "github_pr_automation", "lifecycle_reserved_in_flight": true}'),
    ];

    const callerId = randomUUID();
    const enqueued = await client.enqueue({ session_id: sessionId, caller_id: callerId, content: 'when the agent is done' });
    if (!enqueued.ok) throw new Error(JSON.stringify(enqueued));
    // The event counts the session's waiting entries in the queue this service drains: in owned mode
    // that table also holds the Kandev-written rows (three waiting on this session), beside Kandev not.
    const status = await eventually(
      () => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === sessionId),
      10_000,
      'the queue status event',
    );
    expect(status.data).toMatchObject({ session_id: sessionId, task_id: taskId, count: schema === 'owned' ? 4 : 1, max: 10, auto_run: true });
    expect((status.data.entries as unknown[]).length).toBe(status.data.count);
    // Through the worker: the status event reprojects the task. The three malformed-metadata rows wait.
    const published = await eventually(
      () => summaries.forTask(taskId).find((e) => e.status_summary.queued_prompt_count === 4),
      10_000,
      'a summary counting 4 queued prompts',
    );
    expect(published.status_summary.queued_prompt_count).toBe(4);
    // The summary reaches the bus before its COMMIT (ADR 0004): the stored row follows a moment later.
    await eventually(
      async () => {
        const reply = await client.getSummary({ task_id: taskId });
        return reply.ok && (reply as unknown as { status_summary: Record<string, unknown> }).status_summary.queued_prompt_count === 4 ? true : undefined;
      },
      10_000,
      'the stored summary counting 4',
    );

    // A direct send accepted while the session was IDLE, and the agent started working before any
    // dispatcher delivered it: the real acceptance and the state change commit together, so the
    // worker's dispatcher never sees the session promptable, and the direct receipt waits.
    const direct = randomUUID();
    const schemaOfStore = (await openPromptStore(ctx)).schema;
    const accepted = await beginOrJoin(ctx, async (tx) => {
      await rawRows(tx, `UPDATE task_sessions SET state = 'IDLE' WHERE id = ?`, [sessionId]);
      const outcome = await createPromptStore(tx, schemaOfStore).acceptPrompt({ callerId: direct, target: { kind: 'session', sessionId }, content: 'now' });
      await rawRows(tx, `UPDATE task_sessions SET state = 'RUNNING' WHERE id = ?`, [sessionId]);
      return outcome;
    });
    expect(accepted).toMatchObject({ ok: true, deliveryKind: 'direct' });
    expect(await ctx.knex(receiptTable).where({ id: direct }).first()).toMatchObject({
      delivery_kind: 'direct',
      delivery_reservation_token: null,
      delivery_attempted_at: null,
    });
    expect(await reprojected(taskId)).toMatchObject({ queued_prompt_count: 4 });

    // What the dispatcher does to the entry (its own tests cover how): reserved, then attempted, by
    // an owner whose reservation is live.
    const live = instantAfter(ctx.clock(), 3_600_000);
    await ctx
      .knex(receiptTable)
      .where({ id: callerId })
      .update({ delivery_reservation_token: 'token-1', delivery_reservation_owner: 'w1', delivery_reservation_expires_at: live });
    expect(await reprojected(taskId)).toMatchObject({ queued_prompt_count: 3 });
    await ctx.knex(receiptTable).where({ id: callerId }).update({ delivery_attempted_at: ctx.clock() });
    expect(await reprojected(taskId)).toMatchObject({ queued_prompt_count: 3 });
    // An expired reservation still counts as reserved: the count never reads the clock.
    await ctx
      .knex(receiptTable)
      .where({ id: callerId })
      .update({ delivery_attempted_at: null, delivery_reservation_expires_at: '2000-01-01T00:00:00.000000Z' });
    expect(await reprojected(taskId)).toMatchObject({ queued_prompt_count: 3 });

    await ctx.knex(receiptTable).where({ id: callerId }).delete();
    await ctx.knex('queued_messages').whereIn('id', kandevRows.slice(0, 2)).delete();
    expect(await reprojected(taskId)).toMatchObject({ queued_prompt_count: 1 });
    await ctx.knex('queued_messages').where({ id: kandevRows[2] }).delete();
    const empty = await reprojected(taskId);
    expect(empty).not.toHaveProperty('queued_prompt_count');
    expect(summaries.latest(taskId)?.status_summary).not.toHaveProperty('queued_prompt_count');
  });

  it('verify reports a stored queued_prompt_count that differs from the queue, and a projection repairs it', async () => {
    const { taskId, sessionId } = await w.session({ state: 'RUNNING' });
    const enqueued = await client.enqueue({ session_id: sessionId, caller_id: randomUUID(), content: 'queued' });
    if (!enqueued.ok) throw new Error(JSON.stringify(enqueued));
    await eventually(() => summaries.forTask(taskId).find((e) => e.status_summary.queued_prompt_count === 1), 10_000, 'a summary counting 1 queued prompt');
    expect((await cli(['verify', '--database-url', t.url, '--task', taskId])).status).toBe(0);

    // Another writer left a wrong count.
    const row = await ctx.knex('task_status_summaries').where({ task_id: taskId }).first();
    await ctx
      .knex('task_status_summaries')
      .where({ task_id: taskId })
      .update({ summary: JSON.stringify({ ...JSON.parse(String(row.summary)), queued_prompt_count: 7 }) });
    const json = await cli(['verify', '--database-url', t.url, '--json', '--task', taskId]);
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout.trim())).toEqual({
      task_id: taskId,
      kind: 'stale',
      stored: null,
      derived: null,
      stored_queued_prompt_count: 7,
      derived_queued_prompt_count: 1,
    });
    const text = await cli(['verify', '--database-url', t.url, '--task', taskId]);
    expect(text.stdout).toContain(`${taskId}\tstale\tstored=-\tderived=-\tqueued_prompt_count stored=7 derived=1`);

    expect(await reprojected(taskId)).toMatchObject({ queued_prompt_count: 1 });
    expect((await cli(['verify', '--database-url', t.url, '--task', taskId])).status).toBe(0);
  });
});
