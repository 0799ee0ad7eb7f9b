import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { startWorker } from '../../src/bin/worker.js';
import { catalogSnapshot } from '../support/catalog.js';
import { describeEachDialect, openEmptyDatabase, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter } from '../support/rowWriters.js';
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

// Beside Kandev's schema, `migrate` runs first (the documented order: verify is a dry run that
// migrates nothing) and the rows are Kandev's; every assertion is the owned schema's.
describeEachSchemaAndDialect('verify, reconcile and replay commands on %s', (dialect, schema) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  let summaries: ReturnType<typeof collectSummaries>;
  const tasks: string[] = [];

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix(`cli_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    if (schema === 'kandev') expect((await cli(['migrate', '--database-url', t.url])).status).toBe(0);
    const w = rowWriter(schema, t.ctx);
    for (let i = 0; i < 3; i++) {
      const { taskId, sessionId } = await w.session();
      const turn = await w.turnAt(sessionId, { startedAt: new Date().toISOString() });
      if (i < 2) await w.bundle({ sessionId, turnId: turn });
      tasks.push(taskId);
    }
  });
  afterAll(async () => {
    summaries.stop();
    await deleteTopology(nc, prefix);
    await nc.drain();
    await t.close();
  });

  it('verify lists every task without a summary and exits 1; reconcile repairs and publishes them; verify then exits 0', async () => {
    const before = await cli(['verify', '--database-url', t.url]);
    expect(before.status).toBe(1);
    for (const taskId of tasks) expect(before.stdout).toContain(`${taskId}\tmissing`);
    expect(before.stderr).toMatch(/verified 3 tasks: 3 drifted/);

    const json = await cli(['verify', '--database-url', t.url, '--json', '--task', tasks[0]!]);
    expect(JSON.parse(json.stdout.trim())).toEqual({
      task_id: tasks[0],
      kind: 'missing',
      stored: null,
      derived: 'clarification',
      stored_queued_prompt_count: 0,
      derived_queued_prompt_count: 0,
    });

    const repaired = await cli(['reconcile', '--database-url', t.url, '--nats-url', natsUrl(), '--subject-prefix', prefix]);
    expect(repaired.stderr).toMatch(/reconcile: 3\/3 tasks, 3 drifted, 3 repaired, 0 failed/);
    expect(repaired.status).toBe(0);
    await eventually(() => (tasks.every((id) => summaries.latest(id)) ? true : undefined));
    expect(summaries.latest(tasks[0]!)?.status_summary).toMatchObject({ revision: 1, pending_action: 'clarification' });
    expect(summaries.latest(tasks[2]!)?.status_summary.pending_action).toBeUndefined();

    const after = await cli(['verify', '--database-url', t.url]);
    expect(after.status).toBe(0);
    expect(after.stdout).toBe('');
  });

  it('replay reprojects exactly the tasks that events in the window touched', async () => {
    const worker = await startWorker({
      db: t.db,
      nc,
      logger: silentLogger(),
      config: testWorkerConfig(prefix, { projectionBatchSize: 4 }),
    });
    try {
      nc.publish(`${prefix}task.updated`, envelope('task.updated', { task_id: tasks[1] }));
      await nc.flush();
      await worker.projector.whenIdle();
    } finally {
      await worker.stop();
    }
    // Drift the stored summaries behind the worker's back.
    for (const taskId of tasks) {
      await t.ctx.knex('task_status_summaries').where({ task_id: taskId }).update({ summary: '{"pending_action":"permission"}' });
    }
    const replayed = await cli(['replay', '--from-seq', '1', '--database-url', t.url, '--nats-url', natsUrl(), '--subject-prefix', prefix]);
    expect(replayed.stdout).toMatch(/replayed 1 event: 1 task reprojected, 0 failed/);
    expect(replayed.status).toBe(0);
    const verify = await cli(['verify', '--database-url', t.url]);
    expect(verify.status).toBe(1);
    expect(verify.stdout).not.toContain(tasks[1]!);
    expect(verify.stdout).toContain(tasks[0]!);
  });
});

// The window is checked before the database is opened: once is enough.
describe('the replay command', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('sqlite', undefined, { file: true });
  });
  afterAll(async () => {
    await t.close();
  });

  it('refuses a replay window that is missing, doubled or unreadable', async () => {
    expect((await cli(['replay', '--database-url', t.url])).status).toBe(2);
    expect((await cli(['replay', '--since', 'yesterday-ish', '--database-url', t.url])).stderr).toMatch(/not a time/);
    expect((await cli(['replay', '--from-seq', '-4', '--database-url', t.url])).status).toBe(2);
  });
});

describeEachDialect('verify before migrate on %s', (dialect) => {
  // A dry run migrates nothing. Beside Kandev's tables on PostgreSQL every statement would call a
  // pp_json_* helper migrate has not created yet; both dialects say so the same way, and write nothing.
  it.each([
    ["beside Kandev's tables", 'kandev', openKandevDatabase],
    ['on an empty database', 'owned', openEmptyDatabase],
  ] as const)('says to run migrate first %s, exits 2 and creates nothing', async (_where, mode, open) => {
    const t = await open(dialect, { file: true });
    try {
      const before = await catalogSnapshot(t);
      const verify = await cli(['verify', '--database-url', t.url]);
      expect(verify.status).toBe(2);
      expect(verify.stderr).toMatch(
        new RegExp(
          `this ${mode === 'kandev' ? 'Kandev' : 'owned'}-mode database lacks this service's migrations \\(.+\\): run \`pending-projector migrate\` first`,
        ),
      );
      expect(await catalogSnapshot(t)).toEqual(before);
    } finally {
      await t.close();
    }
  });
});
