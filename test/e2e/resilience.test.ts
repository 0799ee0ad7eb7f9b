import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterEach, describe, expect, it } from 'vitest';
import { Kvm } from '@nats-io/kv';
import { summaryKey } from '../../src/events/natsTopology.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { findDrift } from '../../src/projectors/reconcile.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { describeEachDialect, isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { collectSummaries } from '../support/summaries.js';
import { randomStep, seededRandom, seedWorkloadTasks, type WorkloadTask } from '../support/workload.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';
import { NATS_TEST_MAX_PAYLOAD } from '../support/privateNats.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

async function settled(nc: NatsConnection, prefix: string, timeoutMs = 60_000): Promise<void> {
  const t = topologyFor(prefix);
  const jsm = await jetstreamManager(nc);
  await eventually(
    async () => {
      const info = await jsm.consumers.info(t.eventsStream, t.consumer);
      return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
    },
    timeoutMs,
    'the consumer to drain',
  );
}

async function setup(dialect: DialectName, label: string, taskCount: number) {
  const t: TestDatabase = await openTestDatabase(dialect, undefined, { file: true });
  cleanups.push(() => t.close());
  const nc = await connectTestNats();
  const prefix = uniquePrefix(label);
  cleanups.push(async () => {
    await deleteTopology(nc, prefix);
    await nc.drain();
  });
  const tasks = await seedWorkloadTasks(t.ctx, taskCount);
  return { t, nc, prefix, tasks };
}

function startWorker(t: TestDatabase, prefix: string, extra: Record<string, string> = {}): Promise<WorkerProcess> {
  return spawnWorker({ DATABASE_URL: t.url, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, ...extra }).then((w) => {
    cleanups.push(() => w.stop());
    return w;
  });
}

async function run(
  t: TestDatabase,
  nc: NatsConnection,
  prefix: string,
  tasks: WorkloadTask[],
  steps: number,
  seed: number,
  every?: { at: number; action: () => Promise<void> },
) {
  const random = seededRandom(seed);
  for (let i = 0; i < steps; i++) {
    if (every && i === every.at) await every.action();
    await randomStep(t.ctx, nc, prefix, tasks, random);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describeEachDialect('worker resilience on %s', (dialect) => {
  it('recovers from kill -9 mid-stream: after a restart verify reports zero drift', async () => {
    const { t, nc, prefix, tasks } = await setup(dialect, `kill_${dialect}`, 20);
    let worker = await startWorker(t, prefix);
    await run(t, nc, prefix, tasks, 150, 1, {
      at: 75,
      action: async () => {
        await worker.kill9();
      },
    });
    worker = await startWorker(t, prefix);
    await settled(nc, prefix);
    expect(
      await findDrift(
        createProjectionStore(t.ctx),
        tasks.map((x) => x.taskId),
      ),
    ).toEqual([]);
    const verify = spawnSync(process.execPath, [CLI, 'verify', '--database-url', t.url], { encoding: 'utf8', timeout: 60_000 });
    expect(verify.stderr).toMatch(/verified 20 tasks: 0 drifted/);
    expect(verify.status).toBe(0);
    expect(await worker.stop()).toBe(0);
  }, 180_000);

  it('rides out a NATS server restart under load and converges with zero drift', async () => {
    const port = await freePort();
    const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-nats-'));
    let server: ChildProcess | undefined;
    const startServer = async () => {
      // The worker refuses a server whose max_payload cannot carry its largest message (ADR 0019).
      const configFile = path.join(storeDir, 'max-payload.conf');
      fs.writeFileSync(configFile, `max_payload: ${NATS_TEST_MAX_PAYLOAD}\n`);
      server = spawn('nats-server', ['-c', configFile, '-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
      await eventually(
        () =>
          new Promise<true | undefined>((resolve) => {
            const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
            s.once('error', () => resolve(undefined));
          }),
        10_000,
        'nats-server to listen',
      );
    };
    const stopServer = async () => {
      const s = server!;
      const exited = new Promise((r) => s.once('exit', r));
      s.kill('SIGTERM');
      await exited;
    };
    await startServer();
    cleanups.push(async () => {
      await stopServer();
      fs.rmSync(storeDir, { recursive: true, force: true });
    });
    const url = `nats://127.0.0.1:${port}`;
    const t = await openTestDatabase(dialect, undefined, { file: true });
    cleanups.push(() => t.close());
    const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    cleanups.push(() => nc.close());
    const prefix = uniquePrefix(`natsrestart_${dialect}`);
    const tasks = await seedWorkloadTasks(t.ctx, 15);
    const worker = await spawnWorker({ DATABASE_URL: t.url, NATS_URL: url, SUBJECT_PREFIX: prefix });
    cleanups.push(() => worker.stop());
    await run(t, nc, prefix, tasks, 120, 2, {
      at: 60,
      action: async () => {
        await stopServer();
        await new Promise((r) => setTimeout(r, 500));
        await startServer();
      },
    });
    await settled(nc, prefix);
    expect(
      await findDrift(
        createProjectionStore(t.ctx),
        tasks.map((x) => x.taskId),
      ),
    ).toEqual([]);
    // The bucket lives in memory, so the restart emptied it: the worker recreated it and refilled every
    // task's stored summary from the database.
    const bucket = await new Kvm(nc).open(topologyFor(prefix).summaryBucket);
    const stored = await loadStatusSummaries(
      t.ctx,
      tasks.map((x) => x.taskId),
    );
    await eventually(
      async () => {
        for (const { taskId } of tasks) {
          const entry = await bucket.get(summaryKey(taskId));
          const revision = (entry?.json() as { data?: { status_summary?: { revision?: number } } } | undefined)?.data?.status_summary?.revision;
          if (revision !== stored.get(taskId)!.revision) return undefined;
        }
        return true;
      },
      20_000,
      'the bucket to hold every stored summary',
    );
    expect(worker.child.exitCode).toBeNull();
  }, 180_000);
});

describe('worker resilience on postgres: its connections terminated, and replicas', () => {
  it.skipIf(!isAvailable('postgres'))(
    'survives its PostgreSQL connections being terminated under load and converges with zero drift',
    async () => {
      const { t, nc, prefix, tasks } = await setup('postgres', 'pgkill', 15);
      const appName = `pp-worker-${prefix.slice(0, 12)}`;
      const worker = await startWorker({ ...t, url: `${t.url}&application_name=${appName}` } as TestDatabase, prefix);
      let terminated = 0;
      const terminate = async () => {
        const rows = await t.ctx.knex.raw('SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = ?', [appName]);
        terminated += (rows as { rows: unknown[] }).rows.length;
      };
      const random = seededRandom(3);
      for (let i = 0; i < 150; i++) {
        if (i % 40 === 20) await terminate();
        await randomStep(t.ctx, nc, prefix, tasks, random);
      }
      await settled(nc, prefix);
      expect(terminated).toBeGreaterThan(0);
      expect(
        await findDrift(
          createProjectionStore(t.ctx),
          tasks.map((x) => x.taskId),
        ),
      ).toEqual([]);
      expect(worker.child.exitCode).toBeNull();
    },
    180_000,
  );

  // PostgreSQL only: on SQLite a second worker process is refused (test/e2e/sqliteSingleWorker.test.ts).
  it.skipIf(!isAvailable('postgres'))(
    'runs three replicas on one consumer without a lost update, publishing strictly increasing revisions per task',
    async () => {
      const { t, nc, prefix, tasks } = await setup('postgres', 'replicas_postgres', 10);
      const summaries = collectSummaries(nc, prefix);
      cleanups.push(async () => summaries.stop());
      const workers = await Promise.all([0, 1, 2].map(() => startWorker(t, prefix, { CONCURRENCY: '4' })));
      const random = seededRandom(4);
      await Promise.all(
        [0, 1, 2, 3].map(async () => {
          for (let i = 0; i < 60; i++) await randomStep(t.ctx, nc, prefix, tasks, random);
        }),
      );
      await settled(nc, prefix);
      expect(
        await findDrift(
          createProjectionStore(t.ctx),
          tasks.map((x) => x.taskId),
        ),
      ).toEqual([]);
      for (const task of tasks) {
        const revisions = summaries.forTask(task.taskId).map((e) => e.status_summary.revision);
        for (let i = 1; i < revisions.length; i++) expect(revisions[i]).toBeGreaterThan(revisions[i - 1]!);
        const stored = await t.ctx.knex('task_status_summaries').where({ task_id: task.taskId }).first();
        expect(revisions.at(-1)).toBe(Number(stored.revision));
      }
      for (const w of workers) expect(w.child.exitCode).toBeNull();
    },
    180_000,
  );
});
