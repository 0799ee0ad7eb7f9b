import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { compareAndSetStatusSummaries, loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedTaskWithQuestion } from '../support/seed.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

function doctorJson(databaseUrl: string): Promise<{ status: number | null; doc: Record<string, any> }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'doctor', '--json', '--database-url', databaseUrl], { env: { ...process.env, LOG_LEVEL: 'warn' } });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.on('exit', (status) => resolve({ status, doc: JSON.parse(stdout) as Record<string, any> }));
  });
}

async function metric(port: number, name: string, field: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{field="${field}"} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

/**
 * A real worker beside a stand-in for Kandev's status-summary projector, which also writes
 * `queued_prompt_count` (its count lacks this service's receipts) into the same summary row with
 * Kandev's compare-and-set. Each round the stand-in writes its count and the task is reprojected,
 * as Kandev's next event would have it, so the two writers alternate revisions.
 */
describeEachDialect('a second writer of the summary beside a real worker on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  let worker: WorkerProcess;
  let client: PendingProjectorClient;

  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix(`second_writer_${dialect}`);
    worker = await spawnWorker({ DATABASE_URL: t.url, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, BOOT_RECONCILE: 'false' });
    client = createPendingProjectorClient(nc, { prefix });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  /** Kandev's projector, as far as this service can tell: revision + 1, its own queued_prompt_count. */
  async function kandevWrites(taskId: string, queuedPromptCount: number): Promise<number> {
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    const summary = JSON.stringify({ ...(JSON.parse(stored.summary) as object), queued_prompt_count: queuedPromptCount });
    const written = await compareAndSetStatusSummaries(t.ctx, [{ ...stored, revision: stored.revision + 1, summary }]);
    expect(written.has(taskId)).toBe(true);
    return stored.revision + 1;
  }

  it('warns once in its log naming the task and the field, counts every foreign write in /metrics, and doctor reports the row', async () => {
    const { taskId } = await seedTaskWithQuestion(t.ctx);
    expect(await client.reproject({ task_id: taskId })).toMatchObject({ ok: true });
    const rounds = 3;
    for (let round = 1; round <= rounds; round++) {
      const foreign = await kandevWrites(taskId, round);
      expect(await client.reproject({ task_id: taskId })).toMatchObject({ ok: true });
      // The worker put its own count (no receipts: 0, omitted) back at the next revision.
      const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
      expect(stored.revision).toBe(foreign + 1);
      expect(JSON.parse(stored.summary)).not.toHaveProperty('queued_prompt_count');
    }

    const warnings = await eventually(() => {
      const lines = worker
        .output()
        .split('\n')
        .filter((l) => l.includes('another writer keeps writing'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      return lines.length > 0 ? lines : undefined;
    });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, component: 'projector', taskId, fields: ['queued_prompt_count'], times: 2 });
    expect(String(warnings[0]!.msg)).toContain(`task ${taskId}: another writer keeps writing queued_prompt_count into its status summary`);
    expect(String(warnings[0]!.msg)).toContain('docs/kandev.md#one-owner-per-field');

    expect(await metric(worker.healthPort, 'pending_projector_foreign_summary_writes_total', 'queued_prompt_count')).toBe(rounds);
    expect(await metric(worker.healthPort, 'pending_projector_foreign_summary_writes_total', 'pending_action')).toBeUndefined();

    const { status, doc } = await doctorJson(t.url);
    expect(status).toBe(1);
    expect(doc.foreign_summary_writes).toMatchObject({ hours: 24, tasks: 1, examples: [{ task_id: taskId, fields: ['queued_prompt_count'], count: rounds }] });
    expect(doc.warnings.map((w: { check: string }) => w.check)).toEqual(['foreign_writes']);
  });
});
