import { readFileSync } from 'node:fs';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_SESSION_STATE_CHANGED } from '../../src/contract/kandevEvents.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { rawRows } from '../../src/repository/context.js';
import { redactCredentials } from '../../src/redaction.js';
import { ENDPOINTS } from '../../src/contract/endpoints.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { insertQueuedReceipt } from '../support/promptReceipts.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const SECRET = 'obs-s3cret-pw';

/** docs/metrics.md's table rows: family name, type, and whether it is read from /proc (Linux only). */
const documented = new Map(
  readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8')
    .split('\n')
    .flatMap((line) => {
      const cells = line.split('|').map((c) => c.trim());
      const name = /^`(pending_projector_[a-z0-9_]+)`$/.exec(cells[1] ?? '')?.[1];
      return name ? [[name, { type: cells[2]!, linuxOnly: /\(Linux\)/.test(cells[4] ?? '') }] as const] : [];
    }),
);

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One scrape of /metrics: the families' declared types and every sample. */
async function scrape(port: number): Promise<{ types: Map<string, string>; samples: Sample[] }> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(response.status).toBe(200);
  const text = await response.text();
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    const sample = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/i.exec(line);
    if (sample) {
      const labels = Object.fromEntries([...(sample[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/gi)].map((m) => [m[1]!, m[2]!]));
      samples.push({ name: sample[1]!, labels, value: Number(sample[3]) });
    }
  }
  return { types, samples };
}

const valueOf = (samples: Sample[], name: string, labels: Record<string, string>) =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

describeEachDialect('what a person reads of a real worker on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  let worker: WorkerProcess;
  let databaseUrl: string;
  const natsWithToken = () => natsUrl().replace(/^nats:\/\//, `nats://${SECRET}@`);

  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix(`observe_${dialect}`);
    // PostgreSQL here trusts local connections: the password is carried, never checked, and must never show.
    databaseUrl = dialect === 'postgres' ? t.url.replace(/^(postgres(?:ql)?:\/\/[^@/:]+)@/, `$1:${SECRET}@`) : t.url;
    if (dialect === 'postgres') expect(databaseUrl).toContain(SECRET);
    worker = await spawnWorker({
      DATABASE_URL: databaseUrl,
      NATS_URL: natsWithToken(),
      SUBJECT_PREFIX: prefix,
      BOOT_RECONCILE: 'false',
      DISPATCH_POLL_MS: '200',
    });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('logs JSON when stdout is not a terminal, and its started line names the database and NATS masked, the prefix and the bound health port', async () => {
    const line = worker
      .output()
      .split('\n')
      .find((l) => l.includes('"worker started"'))!;
    const started = JSON.parse(line) as Record<string, unknown>;
    expect(started).toMatchObject({
      component: 'worker',
      database: redactCredentials(databaseUrl),
      nats: natsWithToken().replace(SECRET, '[REDACTED]'),
      subjectPrefix: prefix,
    });
    if (dialect === 'postgres') expect(started.database).toContain(':[REDACTED]@');
    // HEALTH_PORT=0 asked for a free port: the line names the one bound, and it answers.
    expect(started.healthPort).not.toBe(0);
    expect((await fetch(`http://127.0.0.1:${String(started.healthPort)}/healthz`)).status).toBe(200);
    expect(worker.output()).not.toContain(SECRET);
  });

  it('exposes exactly the metric families docs/metrics.md lists, with their types, and no name repeats a word', async () => {
    const { types } = await scrape(worker.healthPort);
    const exposed = [...types.keys()].filter((name) => name.startsWith('pending_projector_'));
    expect(exposed.length).toBeGreaterThan(30);
    expect([...types.keys()].filter((name) => !name.startsWith('pending_projector_'))).toEqual([]);
    expect(
      exposed.filter((name) => !documented.has(name)),
      'exposed but not in docs/metrics.md',
    ).toEqual([]);
    const expected = [...documented].filter(([, d]) => !d.linuxOnly || process.platform === 'linux').map(([name]) => name);
    expect(
      expected.filter((name) => !types.has(name)),
      'in docs/metrics.md but not exposed',
    ).toEqual([]);
    for (const name of exposed) expect(`${name} ${types.get(name)}`).toBe(`${name} ${documented.get(name)!.type}`);
    const doubled = exposed.filter((name) => name.split('_').some((word, i, words) => i > 0 && word === words[i - 1]));
    expect(doubled).toEqual([]);
  });

  it('counts each endpoint request under its reply code and observes its latency', async () => {
    const client = createPendingProjectorClient(nc, { prefix });
    expect(await client.getSummary({ task_id: 'no-such-task' })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    expect(await client.getSummary({ task_id: 'no-such-task-either' })).toMatchObject({ ok: false, error: { code: 'not_found' } });
    const raw = await nc.request(topologyFor(prefix).serviceSubject(ENDPOINTS.summaryGet), new TextEncoder().encode('not json'), { timeout: 10_000 });
    expect(raw.json()).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await client.listPending({ limit: 5 })).toMatchObject({ ok: true });

    const { samples } = await scrape(worker.healthPort);
    const requests = (endpoint: string, code: string) => valueOf(samples, 'pending_projector_endpoint_requests_total', { endpoint, code });
    expect(requests('summary.get', 'not_found')).toBe(2);
    expect(requests('summary.get', 'bad_request')).toBe(1);
    expect(requests('summary.get', 'ok')).toBeUndefined();
    expect(requests('clarification.list_pending', 'ok')).toBe(1);
    const histogram = 'pending_projector_endpoint_request_duration_seconds';
    expect(valueOf(samples, `${histogram}_count`, { endpoint: 'summary.get' })).toBe(3);
    expect(valueOf(samples, `${histogram}_bucket`, { endpoint: 'summary.get', le: '+Inf' })).toBe(3);
    expect(valueOf(samples, `${histogram}_sum`, { endpoint: 'summary.get' })).toBeGreaterThan(0);
    expect(valueOf(samples, `${histogram}_count`, { endpoint: 'clarification.list_pending' })).toBe(1);
  });

  it('gauges a waiting queued prompt, then counts its acknowledged delivery and gauges the queue empty', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const receiptId = await insertQueuedReceipt(t.ctx, { sessionId: task.sessionId, taskId: task.taskId });
    const receipts = (samples: Sample[], kind: string, state: string) => valueOf(samples, 'pending_projector_prompt_receipts', { kind, state });
    // The gauge is read at scrape time through a cache of a few seconds: poll until it caught up.
    const before = await eventually(
      async () => {
        const { samples } = await scrape(worker.healthPort);
        return receipts(samples, 'queued', 'waiting') === 1 ? samples : undefined;
      },
      20_000,
      'the queued receipt to show as waiting',
    );
    expect(receipts(before, 'queued', 'reserved')).toBe(0);
    expect(receipts(before, 'direct', 'waiting')).toBe(0);
    expect(valueOf(before, 'pending_projector_prompt_delivery_attempts_total', { outcome: 'acknowledged' })).toBeUndefined();

    // The agent went idle: the dispatcher delivers the prompt.
    await rawRows(t.ctx, `UPDATE task_sessions SET state = 'IDLE' WHERE id = ?`, [task.sessionId]);
    await jetstream(nc).publish(
      `${prefix}${TASK_SESSION_STATE_CHANGED}`,
      envelope(TASK_SESSION_STATE_CHANGED, { task_id: task.taskId, session_id: task.sessionId, old_state: 'RUNNING', new_state: 'IDLE' }),
    );
    await eventually(
      async () => ((await rawRows(t.ctx, 'SELECT id FROM queued_messages WHERE id = ?', [receiptId])).length === 0 ? true : undefined),
      20_000,
      'the receipt to be settled',
    );
    const after = await eventually(
      async () => {
        const { samples } = await scrape(worker.healthPort);
        return receipts(samples, 'queued', 'waiting') === 0 ? samples : undefined;
      },
      20_000,
      'the waiting gauge to drop',
    );
    expect(valueOf(after, 'pending_projector_prompt_delivery_attempts_total', { outcome: 'acknowledged' })).toBe(1);
    expect(valueOf(after, 'pending_projector_prompt_dispatcher_sessions', { state: 'delivering' })).toBe(0);
  });

  it('logs pino-pretty text with LOG_FORMAT=pretty, secrets masked, and flushes its last lines at shutdown', async () => {
    // The last test: the shared worker stops first, as a second worker on a SQLite file is refused.
    expect(await worker.stop()).toBe(0);
    const pretty = await spawnWorker({
      DATABASE_URL: databaseUrl,
      NATS_URL: natsWithToken(),
      SUBJECT_PREFIX: prefix,
      BOOT_RECONCILE: 'false',
      LOG_FORMAT: 'pretty',
    });
    const code = await pretty.stop();
    const out = pretty.output();
    expect(code).toBe(0);
    const started = out.split('\n').find((l) => l.includes('(worker) worker started'))!;
    expect(started).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \(worker\) worker started \{/);
    expect(started).toContain(`"database":"${redactCredentials(databaseUrl)}"`);
    expect(started).toContain('"nats":"nats://[REDACTED]@');
    expect(out).not.toContain(SECRET);
    expect(out.split('\n').filter((l) => l.startsWith('{"level"'))).toEqual([]);
    expect(out).toMatch(/INFO: \(worker\) worker stopped\n/);
  });
});
