import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, errors, nkeys, type NatsConnection, type Status } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats } from '../../src/bin/connectNats.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { silentLogger } from '../../src/logger.js';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { listDeadLetters } from '../../src/events/deadLetters.js';
import { summaryKey } from '../../src/events/natsTopology.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, TASK_PLAN_DELETED, TASK_SESSION_STATE_CHANGED } from '../../src/contract/kandevEvents.js';
import { rawRows } from '../../src/repository/context.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { startFakeAgent } from '../support/fakeAgent.js';
import { envelope, eventually } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { generateCertificates, privateNatsAvailable, startPrivateNats, type PrivateNats, type TestCertificates } from '../support/privateNats.js';
import { rowWriter, type RowWriter } from '../support/rowWriters.js';
import { shippedNatsConfig } from '../support/shippedNats.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));
const SHIPPED_ACCOUNTS = fileURLToPath(new URL('../../deploy/nats/pending-projector-accounts.conf', import.meta.url));
const ROLES = ['worker', 'backend', 'ui', 'agent', 'ops'] as const;
type Role = (typeof ROLES)[number];
// The shipped file names the empty prefix's subjects and streams.
const topology = topologyFor('');

/** deploy/nats/nats-server.conf as shipped, but for its JetStream store and its WebSocket listener's port (any free one). */
const shippedConfig = (storeDir: string): string => shippedNatsConfig(storeDir, -1);
const SHIPPED_FILES = { files: { 'pending-projector-accounts.conf': readFileSync(SHIPPED_ACCOUNTS, 'utf8') } };

function runCli(args: string[], env: Record<string, string>): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, LOG_LEVEL: 'warn', HEALTH_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (status) => resolve({ status, out }));
  });
}

/** Collects the permission violations the server reports to `nc`. */
function permissionErrors(nc: NatsConnection) {
  const seen: Array<{ operation: string; subject: string }> = [];
  void (async () => {
    for await (const status of nc.status() as AsyncIterable<Status>) {
      if (status.type === 'error' && status.error instanceof errors.PermissionViolationError)
        seen.push({ operation: status.error.operation, subject: status.error.subject });
    }
  })();
  return seen;
}

describe.skipIf(!privateNatsAvailable())('NATS authorization with the shipped deploy/nats configuration', () => {
  // nats-server parses a variable's value as a configuration value: a leading letter keeps it a string.
  const passwords = Object.fromEntries(ROLES.map((role) => [role, `pw${randomBytes(12).toString('hex')}`])) as Record<Role, string>;
  const serverEnv = Object.fromEntries(ROLES.map((role) => [`${role.toUpperCase()}_PASSWORD`, passwords[role]]));
  let server: PrivateNats;
  let t: TestDatabase;
  let w: RowWriter;
  let secrets: string;
  let worker: WorkerProcess;
  const connections: NatsConnection[] = [];
  let backend: NatsConnection;
  let ui: NatsConnection;
  let agent: NatsConnection;
  let ops: NatsConnection;
  let summaries: ReturnType<typeof collectSummaries>;

  /** A role's connection through the service's own connectNats, credentials inside the URL. */
  async function connectAs(role: Role): Promise<NatsConnection> {
    const nc = await connectNats({ natsUrl: `nats://${role}:${passwords[role]}@127.0.0.1:${server.port}`, natsInboxPrefix: `_INBOX_${role}` }, `test-${role}`);
    connections.push(nc);
    return nc;
  }

  const workerEnv = (url: string, extra: Record<string, string> = {}) => ({
    NATS_URL: url,
    NATS_INBOX_PREFIX: '_INBOX_worker',
    DATABASE_URL: t.url,
    SUBJECT_PREFIX: '',
    RESPOND_DEADLINE_MS: '3000',
    BOOT_RECONCILE: 'false',
    // The backend answers it (its subscribe and allow_responses), so prompts exercise the hook too.
    TURN_START_HOOK_SUBJECT: 'kandev.turn_start',
    ...extra,
  });

  /** A pending question on an open turn, announced by the backend, in the ui's summary. */
  async function openQuestion() {
    const seeded = await w.session();
    const turn = await w.startTurn(seeded.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
    const bundle = await w.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: ['pending'] });
    backend.publish(
      'message.added',
      envelope('message.added', { task_id: seeded.taskId, session_id: seeded.sessionId, type: 'clarification_request', requests_input: true }),
    );
    await eventually(
      () => (summaries.latest(seeded.taskId)?.status_summary.pending_action === 'clarification' ? true : undefined),
      15_000,
      'the question in the summary the ui sees',
    );
    return { ...seeded, pendingId: bundle.pendingId };
  }

  beforeAll(async () => {
    server = await startPrivateNats(shippedConfig, serverEnv, SHIPPED_FILES);
    t = await openTestDatabase('sqlite', undefined, { file: true });
    w = rowWriter('owned', t.ctx);
    secrets = mkdtempSync(join(tmpdir(), 'pp-secrets-'));
    writeFileSync(join(secrets, 'worker-password'), `${passwords.worker}\n`, { mode: 0o600 });
    worker = await spawnWorker(workerEnv(server.url, { NATS_USER: 'worker', NATS_PASSWORD_FILE: join(secrets, 'worker-password') }));
    [backend, ui, agent, ops] = await Promise.all([connectAs('backend'), connectAs('ui'), connectAs('agent'), connectAs('ops')]);
    summaries = collectSummaries(ui, '');
  }, 60_000);

  afterAll(async () => {
    summaries?.stop();
    await worker?.stop();
    await Promise.all(connections.map((nc) => nc.close()));
    await t?.close();
    await server?.stop();
    if (secrets) rmSync(secrets, { recursive: true, force: true });
  });

  it('projects a message.added clarification the backend publishes into the summary the ui subscribes to and reads from the KV bucket', async () => {
    const { taskId } = await openQuestion();
    const kv = await new Kvm(ui).open(topology.summaryBucket);
    const entry = await eventually(async () => (await kv.get(summaryKey(taskId))) ?? undefined, 10_000, 'the KV entry');
    expect(entry.json<{ data: { status_summary: { pending_action: string } } }>().data.status_summary.pending_action).toBe('clarification');
    expect(worker.output()).not.toContain(passwords.worker);
  });

  it("answers a respond from the ui through the agent user's live waiter", async () => {
    const { sessionId, pendingId } = await openQuestion();
    const waiter = startFakeAgent(agent, '', sessionId);
    try {
      const reply = await createPendingProjectorClient(ui, { prefix: '' }).respond({
        pending_id: pendingId,
        answers: [{ question_id: 'q1', selected_options: ['a'], custom_text: '' }],
      });
      expect(reply).toMatchObject({ ok: true, delivery: 'live' });
      expect(waiter.deliveries).toHaveLength(1);
    } finally {
      waiter.stop();
    }
  });

  it('answers a respond for a detached session with a resume command the agent user consumes through its own durable consumer', async () => {
    const rejected = await openQuestion();
    const reply = await createPendingProjectorClient(ui, { prefix: '' }).respond({ pending_id: rejected.pendingId, reject: { reason: 'not now' } });
    expect(reply).toMatchObject({ ok: true, delivery: 'none' });
    const answered = await openQuestion();
    const resumed = await createPendingProjectorClient(ui, { prefix: '' }).respond({
      pending_id: answered.pendingId,
      answers: [{ question_id: 'q1', selected_options: ['a'], custom_text: '' }],
    });
    expect(resumed).toMatchObject({ ok: true, delivery: 'resume' });
    const jsm = await jetstreamManager(agent);
    const durable = `agent-${answered.sessionId}`;
    await jsm.consumers.add(topology.agentResumeStream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      filter_subject: topology.agentResumeSubject(answered.sessionId),
    });
    const m = await (await jetstream(agent).consumers.get(topology.agentResumeStream, durable)).next({ expires: 5000 });
    expect(m?.json<{ data: { pending_id: string } }>().data.pending_id).toBe(answered.pendingId);
    await m!.ackAck();
    // Its session over, the agent removes its consumer (one per session would pile up otherwise).
    expect(await jsm.consumers.delete(topology.agentResumeStream, durable)).toBe(true);
  });

  it('lets ops list and retry dead letters and replay the event stream from the CLI', async () => {
    backend.publish('message.added', new TextEncoder().encode('{ not json'));
    const opsJsm = await jetstreamManager(ops);
    const [record] = await eventually(
      async () => {
        const entries = await listDeadLetters(opsJsm, topology).catch(() => []);
        return entries.length > 0 ? entries : undefined;
      },
      15_000,
      'a dead letter',
    );
    expect(record!.record.reason).toBe('invalid_json');
    const opsEnv = {
      NATS_URL: server.url,
      NATS_USER: 'ops',
      NATS_PASSWORD: passwords.ops,
      NATS_INBOX_PREFIX: '_INBOX_ops',
      DATABASE_URL: t.url,
      SUBJECT_PREFIX: '',
    };
    const list = await runCli(['dead-letters', 'list'], opsEnv);
    expect(list.out).toContain('invalid_json');
    expect(list.status).toBe(0);
    const retry = await runCli(['dead-letters', 'retry', String(record!.id)], opsEnv);
    expect(retry.out).toMatch(/re-injected record/);
    expect(retry.status).toBe(0);
    const replay = await runCli(['replay', '--from-seq', '1'], opsEnv);
    expect(replay.out).toMatch(/replayed \d+ events?: \d+ tasks? reprojected, 0 failed/);
    expect(replay.status).toBe(0);
    expect(replay.out + list.out).not.toContain(passwords.ops);
  }, 90_000);

  it('refuses the ui publishing message.added and calling clarification.expire, and the question stays pending', async () => {
    const { taskId, sessionId } = await openQuestion();
    const refused = permissionErrors(ui);
    ui.publish('message.added', envelope('message.added', { task_id: taskId }));
    await ui.flush();
    await eventually(() => (refused.some((e) => e.operation === 'publish' && e.subject === 'message.added') ? true : undefined), 5000, 'the refusal');
    await expect(ui.request(topology.serviceSubject('clarification.expire'), JSON.stringify({ session_id: sessionId }), { timeout: 5000 })).rejects.toThrow(
      /Permissions Violation for Publish to "pending_projector\.v1\.clarification\.expire"/,
    );
    const guard = await createPendingProjectorClient(backend, { prefix: '' }).guard({ session_id: sessionId });
    expect(guard).toMatchObject({ ok: true, blocked: true });
  });

  it("lets the backend read Kandev's events and what the worker publishes for Kandev's browsers, and not the agents' subjects", async () => {
    const seen: Array<{ subject: string; type: string }> = [];
    const subs = ['message.added', 'session.pending_action_changed', 'task.status_summary.updated'].map((subject) =>
      backend.subscribe(subject, { callback: (_err, msg) => void seen.push({ subject: msg.subject, type: msg.json<{ type: string }>().type }) }),
    );
    try {
      await backend.flush();
      const { taskId } = await openQuestion();
      await eventually(
        () =>
          ['message.added', 'session.pending_action_changed', 'task.status_summary.updated'].every((t) => seen.some((e) => e.type === t)) ? true : undefined,
        10_000,
        `the backend to read each event (${taskId})`,
      );
      const refused = backend.subscribe('agent.*.prompt');
      await backend.flush();
      expect(String(await refused.closed)).toMatch(/Permissions Violation for Subscription/);
    } finally {
      for (const sub of subs) sub.unsubscribe();
    }
  });

  it("lets ops call the operations endpoints and the console's board reads, and refuses the ui the operations endpoints", async () => {
    const asOps = createPendingProjectorClient(ops, { prefix: '', timeoutMs: 5000 });
    const asUi = createPendingProjectorClient(ui, { prefix: '', timeoutMs: 5000 });
    const refused = { ok: false, error: { code: 'unavailable', message: expect.stringMatching(/Permissions Violation/) } };
    expect(await asOps.consumerStats({})).toMatchObject({ ok: true, consumer: 'pending-projector' });
    // Every replica answers outside the queue group, which the worker's grant allows for this endpoint only.
    expect(await asOps.replicaStats({})).toMatchObject({ ok: true, replicas: [{ replica: expect.any(String), events_by_outcome: expect.any(Object) }] });
    expect(await asOps.verifySummaries({ limit: 10 })).toMatchObject({ ok: true });
    expect(await asOps.listDeadLetters({ limit: 10 })).toMatchObject({ ok: true });
    const { taskId, sessionId } = await openQuestion();
    expect(await asOps.listTasks({ limit: 10 })).toMatchObject({ ok: true });
    expect(await asOps.getSummary({ task_id: taskId })).toMatchObject({ ok: true });
    expect(await asOps.pendingActions({ task_id: taskId })).toMatchObject({ ok: true });
    expect(await asOps.turns({ session_id: sessionId })).toMatchObject({ ok: true });
    expect(await asOps.listPending({ limit: 10 })).toMatchObject({ ok: true });
    expect(await asOps.listQueue({ session_id: sessionId })).toMatchObject({ ok: true });
    expect(await asUi.listTasks({ limit: 10 })).toMatchObject({ ok: true });
    expect(await asUi.consumerStats({})).toMatchObject(refused);
    expect(await asUi.replicaStats({})).toMatchObject(refused);
    // Only the worker may take replica.stats' requests.
    for (const nc of [backend, ops]) {
      const taker = nc.subscribe(topology.serviceSubject('replica.stats'));
      await nc.flush();
      expect(String(await taker.closed)).toMatch(/Permissions Violation for Subscription/);
    }
    expect(await asUi.retryDeadLetter({ seq: 1 })).toMatchObject(refused);
    expect(await asUi.reproject({ task_id: taskId })).toMatchObject(refused);
  });

  it("lets the ui and ops use the console's queue controls, and refuses them enqueue, update, clear and message.send", async () => {
    const missing = `missing-${randomUUID()}`;
    for (const nc of [ui, ops]) {
      const client = createPendingProjectorClient(nc, { prefix: '', timeoutMs: 5000 });
      // The worker answered: the grant let the request through (the session does not exist).
      const reached = { ok: false, error: { code: 'not_found' } };
      expect(await client.removeQueueEntry({ session_id: missing, queue_id: randomUUID() })).toMatchObject(reached);
      expect(await client.reorderQueue({ session_id: missing, queue_ids: [], revision: 0 })).toMatchObject(reached);
      expect(await client.setQueueAutoRun({ session_id: missing, auto_run: false })).toMatchObject(reached);
      expect(await client.drainQueue({ session_id: missing })).toMatchObject(reached);
      const refused = { ok: false, error: { code: 'unavailable', message: expect.stringMatching(/Permissions Violation/) } };
      expect(await client.clearQueue({ session_id: missing })).toMatchObject(refused);
      expect(await client.updateQueueEntry({ session_id: missing, queue_id: randomUUID(), version: 1, content: 'x' })).toMatchObject(refused);
      expect(await client.enqueue({ task_id: missing, session_id: missing, caller_id: randomUUID(), content: 'x' } as never)).toMatchObject(refused);
      expect(await client.sendMessage({ task_id: missing, session_id: missing, caller_id: randomUUID(), content: 'x' } as never)).toMatchObject(refused);
    }
  });

  it("lets the ui and ops watch the summaries' bucket as the console's board does, refuses both purging or deleting it, and the ui writing it", async () => {
    for (const nc of [ui, ops]) {
      const { taskId } = await openQuestion();
      const kv = await new Kvm(nc).open(topology.summaryBucket);
      const watch = await kv.watch();
      try {
        for await (const entry of watch) if (entry.key === summaryKey(taskId)) break;
      } finally {
        watch.stop();
      }
      // ops writes it for reconcile and replay; the ui never does.
      if (nc === ui) await expect(kv.put(summaryKey(taskId), '{}')).rejects.toThrow(/Permissions Violation for Publish/);
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      await expect(jsm.streams.purge(topology.summaryBucketStream)).rejects.toThrow(/Permissions Violation for Publish/);
      await expect(jsm.streams.delete(topology.summaryBucketStream)).rejects.toThrow(/Permissions Violation for Publish/);
      expect(await (await new Kvm(ui).open(topology.summaryBucket)).get(summaryKey(taskId))).not.toBeNull();
    }
  });

  it("refuses the backend reading the KV bucket's stream directly", async () => {
    const { taskId } = await openQuestion();
    const jsm = await jetstreamManager(backend, { checkAPI: false });
    const subject = `$KV.${topology.summaryBucket}.${summaryKey(taskId)}`;
    await expect(jsm.streams.getMessage(topology.summaryBucketStream, { last_by_subj: subject })).rejects.toThrow(/Permissions Violation for Publish/);
    await expect(jsm.direct.getMessage(topology.summaryBucketStream, { last_by_subj: subject })).rejects.toThrow(/Permissions Violation for Publish/);
    const sub = backend.subscribe(`$KV.${topology.summaryBucket}.>`);
    await backend.flush();
    expect(String(await sub.closed)).toMatch(/Permissions Violation for Subscription/);
  });

  /** The delivery label of the transcript message `id` once the worker settled its receipt (deleted and labelled). */
  const settledLabel = (id: string) =>
    eventually(
      async () => {
        if ((await rawRows(t.ctx, 'SELECT id FROM queued_messages WHERE id = ?', [id])).length > 0) return undefined;
        const message = await t.ctx.knex('task_session_messages').where({ id }).first();
        return message ? (JSON.parse(String(message.metadata)).prompt_delivery as string | undefined) : undefined;
      },
      20_000,
      `the settlement of receipt ${id}`,
    );

  it("delivers a message.send and a queued prompt the backend admits to the agent user's own durable consumer on the prompt stream, each once and acknowledged", async () => {
    // Kandev's backend answers the turn-start hook the worker calls before it accepts a prompt.
    const hook = backend.subscribe('kandev.turn_start', { callback: (_err, m) => void m.respond(JSON.stringify({ ok: true })) });
    try {
      const task = await seedPlanTask(t.ctx, { sessionState: 'IDLE' });
      const client = createPendingProjectorClient(backend, { prefix: '', timeoutMs: 30_000 });
      const sendId = randomUUID();
      const sent = await client.sendMessage({ session_id: task.sessionId, caller_id: sendId, content: 'Please apply these' });
      expect(sent).toMatchObject({ ok: true, delivery_kind: 'direct', message_id: sendId });

      // What docs/endpoints.md tells agent authors: a durable consumer of its own, filtered on its
      // session's subject, pulled and acknowledged by the agent itself.
      const jsm = await jetstreamManager(agent);
      const durable = `agent-prompts-${task.sessionId}`;
      await jsm.consumers.add(topology.agentPromptStream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        filter_subject: topology.agentPromptSubject(task.sessionId),
      });
      const consumer = await jetstream(agent).consumers.get(topology.agentPromptStream, durable);
      const direct = await consumer.next({ expires: 10_000 });
      expect(direct?.json<{ type: string; data: Record<string, unknown> }>()).toMatchObject({
        type: 'session.prompt',
        data: { receipt_id: sendId, session_id: task.sessionId, task_id: task.taskId, delivery_kind: 'direct', content: 'Please apply these' },
      });
      await direct!.ackAck();
      expect(await settledLabel(sendId)).toBe('acknowledged');

      // The delivery claimed the session RUNNING: a prompt queued now waits for the agent to finish.
      const queueId = randomUUID();
      const queued = await client.enqueue({ session_id: task.sessionId, caller_id: queueId, content: 'Then run the tests' });
      expect(queued).toMatchObject({ ok: true, delivery_kind: 'queued', queue_id: queueId });
      const listed = await createPendingProjectorClient(ui, { prefix: '' }).listQueue({ session_id: task.sessionId });
      expect(listed).toMatchObject({ ok: true, count: 1 });
      // The agent finished its turn: Kandev sets the session IDLE and says so.
      await rawRows(t.ctx, `UPDATE task_sessions SET state = 'IDLE' WHERE id = ?`, [task.sessionId]);
      backend.publish(
        TASK_SESSION_STATE_CHANGED,
        envelope(TASK_SESSION_STATE_CHANGED, { task_id: task.taskId, session_id: task.sessionId, old_state: 'RUNNING', new_state: 'IDLE' }),
      );
      const fromQueue = await consumer.next({ expires: 15_000 });
      expect(fromQueue?.json<{ data: Record<string, unknown> }>().data).toMatchObject({
        receipt_id: queueId,
        message_id: queueId,
        delivery_kind: 'queued',
        content: 'Then run the tests',
      });
      await fromQueue!.ackAck();
      expect(await settledLabel(queueId)).toBe('acknowledged');

      // Each arrived once: nothing more to pull, nothing redelivered or waiting for an ack.
      expect(await consumer.next({ expires: 1000 })).toBeNull();
      const info = await consumer.info();
      expect(info).toMatchObject({ num_pending: 0, num_ack_pending: 0, num_redelivered: 0, delivered: { consumer_seq: 2 } });
      expect(await jsm.consumers.delete(topology.agentPromptStream, durable)).toBe(true);
      expect(worker.output()).not.toMatch(/NATS refused|Permissions Violation/);
    } finally {
      hook.unsubscribe();
    }
  }, 60_000);

  it('lets the ui list a queue, and refuses it every admission endpoint (queue.enqueue, message.send, ...): prompts go through the backend', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const listed = await createPendingProjectorClient(ui, { prefix: '' }).listQueue({ session_id: task.sessionId });
    expect(listed).toMatchObject({ ok: true, count: 0 });
    for (const endpoint of ['queue.enqueue', 'message.send', 'plan_comment.run', 'attachment.stage']) {
      const request = JSON.stringify({ session_id: task.sessionId, caller_id: randomUUID(), content: 'from the ui' });
      await expect(ui.request(topology.serviceSubject(endpoint), request, { timeout: 5000 })).rejects.toThrow(
        new RegExp(`Permissions Violation for Publish to "pending_projector\\.v1\\.${endpoint.replaceAll('.', '\\.')}"`),
      );
    }
    expect(await rawRows(t.ctx, 'SELECT id FROM queued_messages WHERE session_id = ?', [task.sessionId])).toEqual([]);
  });

  /** A queue row as Kandev's backend writes one (its queue columns only), and the entry its queue event lists for it. */
  async function kandevQueueRow(sessionId: string, taskId: string, position: number) {
    const row = {
      id: randomUUID(),
      session_id: sessionId,
      task_id: taskId,
      position,
      content: `queued in Kandev ${position}`,
      model: '',
      plan_mode: 0,
      attachments_json: '[]',
      metadata_json: '{}',
      queued_at: new Date().toISOString(),
      queued_by: 'user',
    };
    await t.ctx.knex('queued_messages').insert(row);
    const { attachments_json: _a, metadata_json: _m, plan_mode, ...entry } = row;
    return { ...entry, plan_mode: plan_mode !== 0, attachments: [], metadata: {} };
  }

  /** Kandev's own message.queue.status_changed (its backend's payload, entries and all), published as `backend`. */
  function publishKandevQueueStatus(data: { session_id: string; task_id?: string; entries: unknown[] }) {
    backend.publish(
      MESSAGE_QUEUE_STATUS_CHANGED,
      envelope(MESSAGE_QUEUE_STATUS_CHANGED, { ...data, count: data.entries.length, max: 10, auto_run: true, merge_enabled: false }),
    );
  }

  const queuedCount = (taskId: string, count: number) =>
    eventually(
      () => (summaries.latest(taskId)?.status_summary.queued_prompt_count === count ? true : undefined),
      15_000,
      `queued_prompt_count ${count} in the summary the ui sees`,
    );

  it("lets the backend publish Kandev's message.queue.status_changed, and the worker reprojects the task on it, with task_id or only the session", async () => {
    const refused = permissionErrors(backend);
    // RUNNING sessions: the worker's dispatcher leaves their queues waiting, as Kandev's does.
    const withTask = await w.session({ state: 'RUNNING' });
    const entries = [await kandevQueueRow(withTask.sessionId, withTask.taskId, 1), await kandevQueueRow(withTask.sessionId, withTask.taskId, 2)];
    // Nothing announced the rows yet: only the queue event below projects the task.
    expect(summaries.latest(withTask.taskId)).toBeUndefined();
    publishKandevQueueStatus({ session_id: withTask.sessionId, task_id: withTask.taskId, entries });
    await queuedCount(withTask.taskId, 2);

    // Kandev's payload without task_id: the worker resolves the task from the session.
    const bySession = await w.session({ state: 'RUNNING' });
    const entry = await kandevQueueRow(bySession.sessionId, bySession.taskId, 1);
    expect(summaries.latest(bySession.taskId)).toBeUndefined();
    publishKandevQueueStatus({ session_id: bySession.sessionId, entries: [entry] });
    await queuedCount(bySession.taskId, 1);
    // The count follows the database on the next event: Kandev's drain took the head.
    await t.ctx.knex('queued_messages').where({ id: entry.id }).del();
    publishKandevQueueStatus({ session_id: bySession.sessionId, entries: [] });
    await eventually(
      () => (summaries.latest(bySession.taskId)?.status_summary.queued_prompt_count === undefined ? true : undefined),
      15_000,
      'queued_prompt_count omitted at 0',
    );
    await backend.flush();
    expect(refused).toEqual([]);

    // Still no one else's: the ui may not publish it.
    const uiRefused = permissionErrors(ui);
    ui.publish(MESSAGE_QUEUE_STATUS_CHANGED, envelope(MESSAGE_QUEUE_STATUS_CHANGED, { session_id: withTask.sessionId, task_id: withTask.taskId }));
    await ui.flush();
    await eventually(
      () => (uiRefused.some((e) => e.operation === 'publish' && e.subject === MESSAGE_QUEUE_STATUS_CHANGED) ? true : undefined),
      5000,
      'the ui refused',
    );
  }, 60_000);

  it("publishes task_plan.deleted as worker after the backend's plan.delete, and the ui receives it", async () => {
    const task = await seedPlanTask(t.ctx);
    const deletions = ui.subscribe(TASK_PLAN_DELETED);
    await ui.flush();
    try {
      expect(await createPendingProjectorClient(backend, { prefix: '' }).deletePlan({ task_id: task.taskId, plan_id: task.planId })).toMatchObject({
        ok: true,
        deleted: true,
      });
      for await (const m of deletions) {
        const event = m.json<{ type: string; data: Record<string, unknown> }>();
        if (event.data.task_id !== task.taskId) continue;
        expect(event).toMatchObject({ type: TASK_PLAN_DELETED, data: { id: task.planId, task_id: task.taskId, content: '# Plan\n1. migrate\n2. test' } });
        break;
      }
    } finally {
      deletions.unsubscribe();
    }
    expect(worker.output()).not.toMatch(/NATS refused|Permissions Violation/);
  }, 30_000);

  it('exits 2 on a wrong password, naming the user and the setting to correct and never the password', async () => {
    const wrong = `pw${randomBytes(12).toString('hex')}`;
    const run = await runCli(['worker'], workerEnv(server.url, { NATS_USER: 'worker', NATS_PASSWORD: wrong }));
    expect(run.status).toBe(2);
    expect(run.out).toContain('refused user "worker" (password from NATS_PASSWORD / --nats-password): Authorization Violation');
    expect(run.out).toContain("the server's WORKER_PASSWORD");
    const inUrl = await runCli(['dead-letters', 'list'], {
      NATS_URL: `nats://ops:${wrong}@127.0.0.1:${server.port}`,
      NATS_INBOX_PREFIX: '_INBOX_ops',
      SUBJECT_PREFIX: '',
    });
    expect(inUrl.status).toBe(2);
    expect(inUrl.out).toContain('refused user "ops" (password from NATS_URL / --nats-url)');
    for (const out of [run.out, inUrl.out]) {
      expect(out).not.toContain(wrong);
      expect(out).not.toContain(passwords.worker);
      expect(out).not.toContain('"worker started"');
    }
  }, 60_000);

  it('exits 2 on an unsupported DATABASE_URL carrying passwords, printing none, and closes its NATS connection to do so', async () => {
    const secret = `pw${randomBytes(12).toString('hex')}`;
    const run = await runCli(
      ['worker'],
      workerEnv(server.url, {
        NATS_USER: 'worker',
        NATS_PASSWORD: passwords.worker,
        DATABASE_URL: `mysql://app:${secret}@db/k?password=${secret}&sslpassword=${secret}`,
      }),
    );
    expect(run.status).toBe(2);
    expect(run.out).toContain('unsupported DATABASE_URL "mysql://app:[REDACTED]@db/k?password=[REDACTED]&sslpassword=[REDACTED]"');
    expect(run.out).not.toContain(secret);
  }, 60_000);

  // The publishes start cannot probe (summaries, Kandev events) were made above: none was refused.
  it('ran every flow above without the server refusing the worker anything', () => {
    expect(worker.output()).toContain('"worker started"');
    expect(worker.output()).not.toMatch(/NATS refused|Permissions Violation/);
  });

  describe('a worker whose user is too narrow', () => {
    let narrow: PrivateNats;

    // The shipped worker user, copied as `narrow` without one line: what each test takes away.
    function narrowed(remove: string, user: string): string {
      const text = readFileSync(SHIPPED_ACCOUNTS, 'utf8');
      const block = /\n {6}\{\n {8}user: worker\n[\s\S]*?\n {6}\}\n/.exec(text)![0];
      expect(block).toContain(remove);
      return block.replace('user: worker', `user: ${user}`).replace('$WORKER_PASSWORD', `$${user.toUpperCase()}_PASSWORD`).replace(remove, '');
    }

    beforeAll(async () => {
      const users = [
        narrowed('"agent.*.clarification", "agent.*.resume", "agent.*.prompt",', 'noagent'),
        narrowed('"pending_projector.v1.> pending-projector",', 'noserve'),
        narrowed('"task.status_summary.updated", ', 'nosummary'),
        narrowed('"session.pending_action_changed", ', 'nokandev'),
        '{ user: reader, password: $READER_PASSWORD }',
      ];
      narrow = await startPrivateNats(
        (storeDir) => `jetstream { store_dir: ${JSON.stringify(storeDir)} }\naccounts { KANDEV { jetstream: enabled\n users: [${users.join('\n')}] } }\n`,
        { NOAGENT_PASSWORD: 'p1', NOSERVE_PASSWORD: 'p2', NOSUMMARY_PASSWORD: 'p3', NOKANDEV_PASSWORD: 'p4', READER_PASSWORD: 'p5' },
      );
    });
    afterAll(async () => {
      await narrow?.stop();
    });

    it('exits 2 at start naming each publish subject it may not use', async () => {
      const run = await runCli(['worker'], workerEnv(narrow.url, { NATS_USER: 'noagent', NATS_PASSWORD: 'p1' }));
      expect(run.status).toBe(2);
      for (const subject of ['agent.*.clarification', 'agent.*.resume', 'agent.*.prompt']) expect(run.out).toContain(`publish to "${subject}"`);
      expect(run.out).not.toContain('"worker started"');
    }, 60_000);

    it('exits 2 at start naming a Kandev event it may not publish, and probes a permitted one with an envelope no reader handles', async () => {
      const reader = await connect({ servers: narrow.url, user: 'reader', pass: 'p5' });
      const seen: unknown[] = [];
      const sub = reader.subscribe('message.queue.status_changed', { callback: (_err, msg) => void seen.push(msg.json()) });
      await reader.flush();
      try {
        const run = await runCli(['worker'], workerEnv(narrow.url, { NATS_USER: 'nokandev', NATS_PASSWORD: 'p4' }));
        expect(run.status).toBe(2);
        expect(run.out).toContain(`publish to "session.pending_action_changed" (Kandev's session.pending_action_changed event)`);
        expect(run.out).not.toContain('publish to "message.queue.status_changed"');
        await reader.flush();
        // The permitted event was probed with an envelope no reader handles: no task, a probe type.
        expect(seen).toEqual([expect.objectContaining({ type: 'pending_projector.permission_probe', data: {} })]);
      } finally {
        sub.unsubscribe();
        await reader.close();
      }
    }, 60_000);

    it('exits 2 naming the endpoint subject and queue group it may not subscribe to', async () => {
      // A database of its own: the refusal comes once the worker took the SQLite file's worker lock,
      // which the worker of the flows above holds on theirs.
      const db = await openTestDatabase('sqlite', undefined, { file: true });
      const run = await runCli(['worker'], workerEnv(narrow.url, { NATS_USER: 'noserve', NATS_PASSWORD: 'p2', DATABASE_URL: db.url })).finally(() =>
        db.close(),
      );
      expect(run.status).toBe(2);
      expect(run.out).toMatch(/subscribe to "pending_projector\.v1\.[a-z_.]+" in queue group "pending-projector"/);
      expect(run.out).not.toContain('"worker started"');
    }, 60_000);

    it('starts without a publish start cannot probe, and names its subject when the server refuses it', async () => {
      const db = await openTestDatabase('sqlite', undefined, { file: true });
      await rowWriter('owned', db.ctx).session();
      const narrowWorker = await spawnWorker({
        ...workerEnv(narrow.url, { NATS_USER: 'nosummary', NATS_PASSWORD: 'p3', DATABASE_URL: db.url }),
        BOOT_RECONCILE: 'true',
      });
      try {
        // The boot reconcile projects the seeded task and publishes its first summary.
        const refusal = (line: string) =>
          line.includes('"nats":"permission"') && line.includes('"operation":"publish"') && line.includes('"subject":"task.status_summary.updated"');
        await eventually(() => (narrowWorker.output().split('\n').some(refusal) ? true : undefined), 15_000, 'the refusal in the log');
      } finally {
        await narrowWorker.stop();
        await db.close();
      }
    }, 60_000);
  });

  describe('a prefix-scoped deployment (deploy/nats/prefix-accounts.sh acme.)', () => {
    let prefixed: PrivateNats;
    let db: TestDatabase;
    let inProcess: WorkerHandle;
    const own: NatsConnection[] = [];
    const as = async (role: Role) => {
      const nc = await connectNats(
        { natsUrl: `nats://${role}:${passwords[role]}@127.0.0.1:${prefixed.port}`, natsInboxPrefix: `_INBOX_${role}` },
        `test-acme-${role}`,
      );
      own.push(nc);
      return nc;
    };

    beforeAll(async () => {
      const accounts = execFileSync(fileURLToPath(new URL('../../deploy/nats/prefix-accounts.sh', import.meta.url)), ['acme.'], { encoding: 'utf8' });
      prefixed = await startPrivateNats(shippedConfig, serverEnv, { files: { 'pending-projector-accounts.conf': accounts } });
      db = await openTestDatabase('sqlite');
    });
    afterAll(async () => {
      await inProcess?.stop();
      await Promise.all(own.map((nc) => nc.close()));
      await db?.close();
      await prefixed?.stop();
    });

    it("runs a worker with SUBJECT_PREFIX=acme. as worker, gives the ui the console's prefixed grants, and keeps it to the prefixed subjects", async () => {
      const workerNc = await as('worker');
      inProcess = await startWorker({
        db: db.db,
        nc: workerNc,
        logger: silentLogger(),
        config: testWorkerConfig('acme.', { natsInboxPrefix: '_INBOX_worker' }),
      });
      const [acmeBackend, acmeUi] = await Promise.all([as('backend'), as('ui')]);
      const seen = collectSummaries(acmeUi, 'acme.');
      try {
        const aw = rowWriter('owned', db.ctx);
        const seeded = await aw.session();
        const turn = await aw.startTurn(seeded.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
        await aw.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: ['pending'] });
        acmeBackend.publish('acme.message.added', envelope('message.added', { task_id: seeded.taskId }));
        await eventually(
          () => (seen.latest(seeded.taskId)?.status_summary.pending_action === 'clarification' ? true : undefined),
          15_000,
          'the prefixed summary',
        );
        // The console's grants, prefixed: the bucket's watch and a queue control.
        const kv = await new Kvm(acmeUi).open(topologyFor('acme.').summaryBucket);
        const watch = await kv.watch();
        try {
          for await (const entry of watch) if (entry.key === summaryKey(seeded.taskId)) break;
        } finally {
          watch.stop();
        }
        const acmeClient = createPendingProjectorClient(acmeUi, { prefix: 'acme.', timeoutMs: 5000 });
        expect(await acmeClient.drainQueue({ session_id: `missing-${randomUUID()}` })).toMatchObject({ ok: false, error: { code: 'not_found' } });
        const unprefixed = acmeUi.subscribe('task.status_summary.updated');
        await acmeUi.flush();
        expect(String(await unprefixed.closed)).toMatch(/Permissions Violation for Subscription/);
      } finally {
        seen.stop();
      }
    });
  });

  describe('over TLS', () => {
    let certs: TestCertificates;
    let tlsServer: PrivateNats;
    let tlsDb: TestDatabase;
    let tlsWorker: WorkerProcess;

    beforeAll(async () => {
      certs = generateCertificates();
      tlsServer = await startPrivateNats(shippedConfig, serverEnv, {
        ...SHIPPED_FILES,
        tls: { certFile: certs.serverCertFile, keyFile: certs.serverKeyFile, caFile: certs.caFile, verify: true },
      });
      tlsDb = await openTestDatabase('sqlite', undefined, { file: true });
      tlsWorker = await spawnWorker({
        ...workerEnv(`tls://worker:${passwords.worker}@127.0.0.1:${tlsServer.port}`, { DATABASE_URL: tlsDb.url }),
        NATS_TLS_CA_FILE: certs.caFile,
        NATS_TLS_CERT_FILE: certs.clientCertFile,
        NATS_TLS_KEY_FILE: certs.clientKeyFile,
      });
    }, 60_000);
    afterAll(async () => {
      await tlsWorker?.stop();
      await tlsDb?.close();
      await tlsServer?.stop();
      certs?.remove();
    });

    it('runs the worker over tls:// with a client certificate: a backend event is projected and served', async () => {
      const tlsOptions = { caFile: certs.caFile, certFile: certs.clientCertFile, keyFile: certs.clientKeyFile };
      const nc = await connect({
        servers: `127.0.0.1:${tlsServer.port}`,
        user: 'backend',
        pass: passwords.backend,
        inboxPrefix: '_INBOX_backend',
        tls: tlsOptions,
      });
      try {
        const tw = rowWriter('owned', tlsDb.ctx);
        const seeded = await tw.session();
        const turn = await tw.startTurn(seeded.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
        await tw.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: ['pending'] });
        nc.publish('message.added', envelope('message.added', { task_id: seeded.taskId }));
        const client = createPendingProjectorClient(nc, { prefix: '' });
        const reply = await eventually(
          async () => {
            const r = await client.getSummary({ task_id: seeded.taskId });
            return r.ok && r.status_summary.pending_action === 'clarification' ? r : undefined;
          },
          15_000,
          'the projected summary',
        );
        expect(reply.ok).toBe(true);
        expect(tlsWorker.output()).not.toContain(passwords.worker);
      } finally {
        await nc.close();
      }
    });

    it('refuses a client without TLS, and one without a client certificate', async () => {
      await expect(
        connect({ servers: `127.0.0.1:${tlsServer.port}`, user: 'backend', pass: passwords.backend, tls: null, reconnect: false }),
      ).rejects.toThrow();
      await expect(
        connect({ servers: `127.0.0.1:${tlsServer.port}`, user: 'backend', pass: passwords.backend, tls: { caFile: certs.caFile }, reconnect: false }),
      ).rejects.toThrow();
    });
  });
});

describe.skipIf(!privateNatsAvailable())('token and NKey authentication through connectNats', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'pp-auth-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Whether a connection with `settings` is accepted: a round trip through the server answers. */
  async function roundTrip(natsUrl: string, settings: { natsTokenFile?: string; natsNkeySeedFile?: string }): Promise<void> {
    const nc = await connectNats({ natsUrl, ...settings }, 'test-auth');
    try {
      await nc.flush();
    } finally {
      await nc.close();
    }
  }

  it('authenticates with a token file, and is refused with a wrong token', async () => {
    const server = await startPrivateNats(() => 'authorization { token: $TEST_TOKEN }\n', { TEST_TOKEN: 'tok3n-from-env' });
    try {
      writeFileSync(join(dir, 'token'), 'tok3n-from-env\n');
      writeFileSync(join(dir, 'wrong'), 'not-the-token\n');
      await roundTrip(server.url, { natsTokenFile: join(dir, 'token') });
      await expect(roundTrip(server.url, { natsTokenFile: join(dir, 'wrong') })).rejects.toThrow(/Authorization/i);
      // Through the CLI: the configuration-error exit, the setting and its path, never a token.
      const run = await runCli(['dead-letters', 'list'], { NATS_URL: server.url, NATS_TOKEN_FILE: join(dir, 'wrong') });
      expect(run.status).toBe(2);
      expect(run.out).toContain(`refused the token from NATS_TOKEN_FILE / --nats-token-file (${JSON.stringify(join(dir, 'wrong'))}): Authorization Violation`);
      expect(run.out).not.toMatch(/not-the-token|tok3n-from-env/);
    } finally {
      await server.stop();
    }
  });

  it('authenticates with an NKey seed file', async () => {
    const user = nkeys.createUser();
    const server = await startPrivateNats(() => `authorization { users: [ { nkey: ${user.getPublicKey()} } ] }\n`, {});
    try {
      writeFileSync(join(dir, 'seed'), `${new TextDecoder().decode(user.getSeed())}\n`, { mode: 0o600 });
      await roundTrip(server.url, { natsNkeySeedFile: join(dir, 'seed') });
      writeFileSync(join(dir, 'other-seed'), new TextDecoder().decode(nkeys.createUser().getSeed()), { mode: 0o600 });
      await expect(roundTrip(server.url, { natsNkeySeedFile: join(dir, 'other-seed') })).rejects.toThrow(/Authorization/i);
    } finally {
      await server.stop();
    }
  });
});

describe('secrets on the command line', () => {
  const SECRET = 'cli-s3cret-value';
  const unreachable = { LOG_LEVEL: 'info' };

  it('--help names the secret settings and shows no value of the environment', async () => {
    const help = await runCli(['worker', '--help'], {
      NATS_PASSWORD: SECRET,
      NATS_TOKEN: SECRET,
      DATABASE_URL: `postgres://app:${SECRET}@127.0.0.1:1/k`,
      NATS_URL: `nats://w:${SECRET}@127.0.0.1:1`,
    });
    expect(help.status).toBe(0);
    for (const name of ['NATS_TOKEN_FILE', 'NATS_PASSWORD_FILE', 'NATS_NKEY_SEED_FILE', 'NATS_CREDS_FILE', 'NATS_TLS_CA_FILE', 'NATS_INBOX_PREFIX'])
      expect(help.out).toContain(name);
    expect(help.out).not.toContain(SECRET);
  });

  it('exits 2 on a bad secret or conflicting credentials, naming the settings but not the secrets', async () => {
    const badPassword = await runCli(['worker'], { ...unreachable, NATS_USER: 'worker', NATS_PASSWORD: `${SECRET}\nsecond line` });
    expect(badPassword.status).toBe(2);
    expect(badPassword.out).toContain('NATS_PASSWORD / --nats-password');
    const twice = await runCli(['worker'], { ...unreachable, NATS_URL: `nats://worker:${SECRET}@127.0.0.1:1`, NATS_TOKEN: SECRET });
    expect(twice.status).toBe(2);
    expect(twice.out).toMatch(/NATS authentication is given 2 ways/);
    expect(badPassword.out + twice.out).not.toContain(SECRET);
  }, 30_000);

  it('keeps a password=, sslpassword= or encoded password parameter of DATABASE_URL out of config errors and reports', async () => {
    const unsupported = await runCli(['migrate'], { ...unreachable, DATABASE_URL: `mysql://app@db/k?password=${SECRET}&sslpassword=${SECRET}` });
    expect(unsupported.status).toBe(2);
    expect(unsupported.out).toContain('unsupported DATABASE_URL "mysql://app@db/k?password=[REDACTED]&sslpassword=[REDACTED]"');
    // doctor names the database it could not reach, on stderr and in its report.
    const doctor = await runCli(['doctor', '--json'], { ...unreachable, DATABASE_URL: `postgres://app@127.0.0.1:1/k?sslmode=disable&pass%77ord=${SECRET}` });
    expect(doctor.status).toBe(3);
    expect(doctor.out).toContain('postgres://app@127.0.0.1:1/k?sslmode=disable&pass%77ord=[REDACTED]');
    expect(unsupported.out + doctor.out).not.toContain(SECRET);
  }, 30_000);

  it('keeps the password of DATABASE_URL and NATS_URL out of a failed connection', async () => {
    const db = await runCli(['migrate'], { ...unreachable, DATABASE_URL: `postgres://postgres:${SECRET}@127.0.0.1:1/test` });
    expect(db.status).toBe(3);
    const bus = await runCli(['dead-letters', 'list'], { ...unreachable, NATS_URL: `nats://ops:${SECRET}@127.0.0.1:1` });
    expect(bus.status).toBe(3);
    expect(db.out + bus.out).not.toContain(SECRET);
    expect(db.out.length + bus.out.length).toBeGreaterThan(0);
  }, 30_000);
});
