import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { promptsOnStream } from '../support/promptReceipts.js';
import { privateNatsAvailable, startPrivateNats, type PrivateNats } from '../support/privateNats.js';
import { shippedNatsConfig } from '../support/shippedNats.js';
import { childEnv, ROOT, spawnLong, type LongProcess } from '../support/sandboxProcess.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const EXAMPLE = path.join(ROOT, 'examples/agentctlBridge.ts');
const CONSUMER = 'agentctl-bridge';

interface AgentRequest {
  path: string;
  idempotencyKey: string | undefined;
  body: Record<string, unknown>;
}

/**
 * A stand-in for the agent's HTTP prompt API: records every request, and answers 200, or 503 for
 * the sessions the test makes refuse.
 */
async function startStandInAgent() {
  const requests: AgentRequest[] = [];
  const refusing = new Set<string>();
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      requests.push({ path: req.url ?? '', idempotencyKey: req.headers['idempotency-key'] as string | undefined, body });
      res.statusCode = refusing.has(String(body.session_id)) ? 503 : 200;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    refusing,
    forReceipt: (receiptId: string) => requests.filter((r) => r.body.receipt_id === receiptId),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * examples/agentctlBridge.ts run as a user runs it (tsx resolves `pending-projector` to the sources
 * dist/ is built from), against a real `pending-projector worker` process on a real database, the
 * real NATS under a unique prefix, and a stand-in agent over HTTP. The prompt goes in through the
 * typed client's message.send, the way a UI sends one.
 */
describeEachDialect('examples/agentctlBridge.ts between a worker on %s and an HTTP agent', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerProcess;
  let bridge: LongProcess;
  let agent: Awaited<ReturnType<typeof startStandInAgent>>;
  let client: PendingProjectorClient;
  const prefix = uniquePrefix(`bridge_${dialect}`);
  const topology = topologyFor(prefix);

  const startBridge = async () => {
    const run = spawnLong(
      ['--import', 'tsx', EXAMPLE],
      childEnv({ NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, AGENT_URL: agent.url, AGENT_TIMEOUT_MS: '10000' }),
    );
    await run.waitFor(/"msg":"bridge ready"/, 60_000);
    return run;
  };

  /** The transcript's delivery label once the worker settled the receipt (the receipt gone, the label written). */
  const settledLabel = (id: string) =>
    eventually(
      async () => {
        if (await t.ctx.knex('queued_messages').where({ id }).first()) return undefined;
        const message = await t.ctx.knex('task_session_messages').where({ id }).first();
        return message ? (JSON.parse(String(message.metadata)).prompt_delivery as string | undefined) : undefined;
      },
      30_000,
      `the settlement of receipt ${id}`,
    );

  /** The bridge's consumer once it holds nothing more to hand out and nothing unacknowledged: nothing can come again. */
  const consumerAtRest = () =>
    eventually(
      async () => {
        const info = await (await jetstreamManager(nc)).consumers.info(topology.agentPromptStream, CONSUMER);
        return info.num_pending === 0 && info.num_ack_pending === 0 ? info : undefined;
      },
      20_000,
      'the bridge consumer at rest',
    );

  /** A prompt sent through the typed client to a fresh task's IDLE session, which the stand-in agent refuses when `refuse` says so. */
  const send = async (content: string, options: { refuse?: boolean } = {}) => {
    const task = await seedPlanTask(t.ctx);
    if (options.refuse) agent.refusing.add(task.sessionId);
    const callerId = randomUUID();
    expect(await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content })).toMatchObject({ ok: true, delivery_kind: 'direct' });
    return { ...task, callerId };
  };

  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    nc = await connectTestNats();
    agent = await startStandInAgent();
    worker = await spawnWorker({ DATABASE_URL: t.url, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, BOOT_RECONCILE: 'false', DISPATCH_POLL_MS: '100' });
    bridge = await startBridge();
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 20_000 });
  }, 120_000);
  afterAll(async () => {
    await bridge?.stop();
    await worker?.stop();
    await agent?.close();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('forwards a sent prompt to the agent exactly once, with its text and ids, and the worker labels it acknowledged', async () => {
    const sent = await send('Please apply the plan');
    await bridge.waitFor(new RegExp(`"msg":"prompt forwarded","receipt_id":"${sent.callerId}"`), 30_000);
    expect(await settledLabel(sent.callerId)).toBe('acknowledged');
    await consumerAtRest();

    const received = agent.forReceipt(sent.callerId);
    expect(received).toHaveLength(1);
    const [request] = received;
    expect(request!.path).toBe('/prompt');
    expect(request!.idempotencyKey).toBe(sent.callerId);
    expect(request!.body).toMatchObject({
      receipt_id: sent.callerId,
      message_id: sent.callerId,
      session_id: sent.sessionId,
      task_id: sent.taskId,
      content: 'Please apply the plan',
    });
    const message = await t.ctx.knex('task_session_messages').where({ id: sent.callerId }).first();
    expect(request!.body.turn_id).toBe(message.turn_id);
  }, 90_000);

  it('drops a prompt the agent refuses without calling it again, also across a restart of the bridge, and goes on forwarding', async () => {
    const refused = await send('The agent will refuse this one', { refuse: true });
    await bridge.waitFor(new RegExp(`"msg":"agent did not take the prompt; not retried","receipt_id":"${refused.callerId}".*"status":503`), 30_000);
    await consumerAtRest();
    // The worker's label covers the prompt stream, which took the prompt; the agent's refusal is the bridge's to report.
    expect(await settledLabel(refused.callerId)).toBe('acknowledged');

    expect(await bridge.stop()).toBe(0);
    bridge = await startBridge();
    const next = await send('And this one it takes');
    await bridge.waitFor(new RegExp(`"msg":"prompt forwarded","receipt_id":"${next.callerId}"`), 30_000);
    const info = await consumerAtRest();
    expect(info.num_redelivered).toBe(0);

    expect(agent.forReceipt(refused.callerId)).toHaveLength(1);
    expect(agent.forReceipt(next.callerId)).toHaveLength(1);
    expect(bridge.stdout()).not.toContain(refused.callerId);
  }, 120_000);

  it('drops a second copy of a prompt it already forwarded (the same receipt_id under another message id) without calling the agent', async () => {
    const sent = await send('Only once, please');
    await bridge.waitFor(new RegExp(`"msg":"prompt forwarded","receipt_id":"${sent.callerId}"`), 30_000);
    const [stored] = await promptsOnStream(nc, prefix, sent.sessionId);
    // The stream drops a repeat of the worker's Nats-Msg-Id; a copy under another id is what dedupe on receipt_id is for.
    await jetstream(nc).publish(topology.agentPromptSubject(sent.sessionId), JSON.stringify({ type: 'session.prompt', data: stored!.data }), {
      msgID: `copy:${sent.callerId}`,
    });
    await bridge.waitFor(new RegExp(`"msg":"duplicate prompt dropped","receipt_id":"${sent.callerId}"`), 30_000);
    await consumerAtRest();
    expect(agent.forReceipt(sent.callerId)).toHaveLength(1);
  }, 60_000);

  it('terminates a message on the prompt subject that is not a prompt, and calls no agent for it', async () => {
    const before = agent.requests.length;
    await jetstream(nc).publish(topology.agentPromptSubject('not-a-session'), 'not json');
    await bridge.waitFor(/"msg":"malformed prompt dropped","subject":"[^"]*agent\.not-a-session\.prompt"/, 30_000);
    await consumerAtRest();
    expect(agent.requests.length).toBe(before);
  }, 60_000);
});

/** deploy/nats as shipped (the empty prefix's subjects and streams), but for its JetStream store and WebSocket port. */
const SHIPPED_ACCOUNTS = readFileSync(path.join(ROOT, 'deploy/nats/pending-projector-accounts.conf'), 'utf8');
const ROLES = ['worker', 'backend', 'ui', 'agent', 'ops'] as const;

describe.skipIf(!privateNatsAvailable())("examples/agentctlBridge.ts as the shipped roles' agent user", () => {
  // A leading letter keeps nats-server reading the variable as a string.
  const passwords = Object.fromEntries(ROLES.map((role) => [role, `pw${randomBytes(12).toString('hex')}`])) as Record<(typeof ROLES)[number], string>;
  let server: PrivateNats;
  let t: TestDatabase;
  let worker: WorkerProcess;
  let backend: NatsConnection;
  let agent: Awaited<ReturnType<typeof startStandInAgent>>;
  let bridge: LongProcess;

  beforeAll(async () => {
    server = await startPrivateNats(
      (storeDir) => shippedNatsConfig(storeDir, -1),
      Object.fromEntries(ROLES.map((role) => [`${role.toUpperCase()}_PASSWORD`, passwords[role]])),
      { files: { 'pending-projector-accounts.conf': SHIPPED_ACCOUNTS } },
    );
    t = await openTestDatabase('sqlite', undefined, { file: true });
    const as = (role: (typeof ROLES)[number]) => ({
      NATS_URL: server.url,
      NATS_USER: role,
      NATS_PASSWORD: passwords[role],
      NATS_INBOX_PREFIX: `_INBOX_${role}`,
    });
    worker = await spawnWorker({ ...as('worker'), DATABASE_URL: t.url, SUBJECT_PREFIX: '', BOOT_RECONCILE: 'false', DISPATCH_POLL_MS: '100' });
    backend = await connect({ servers: server.url, user: 'backend', pass: passwords.backend, inboxPrefix: '_INBOX_backend' });
    agent = await startStandInAgent();
    bridge = spawnLong(['--import', 'tsx', EXAMPLE], childEnv({ ...as('agent'), SUBJECT_PREFIX: '', AGENT_URL: agent.url }));
    await bridge.waitFor(/"msg":"bridge ready"/, 60_000);
  }, 120_000);
  afterAll(async () => {
    await bridge?.stop();
    await worker?.stop();
    await agent?.close();
    await backend?.close();
    await t?.close();
    await server?.stop();
  });

  it("forwards a prompt that Kandev's backend user sends, with nothing of the bridge refused", async () => {
    const task = await seedPlanTask(t.ctx);
    const callerId = randomUUID();
    const client = createPendingProjectorClient(backend, { prefix: '', timeoutMs: 20_000 });
    expect(await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'Run the tests' })).toMatchObject({ ok: true });
    await bridge.waitFor(new RegExp(`"msg":"prompt forwarded","receipt_id":"${callerId}"`), 30_000);
    expect(agent.forReceipt(callerId).map((r) => r.body.content)).toEqual(['Run the tests']);
    expect(bridge.output()).not.toMatch(/permission/i);
    expect(server.output()).not.toMatch(/permissions violation/i);
  }, 90_000);
});
