import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startWorker } from '../../src/bin/worker.js';
import { SqliteWorkerLockedError } from '../../src/repository/sqliteWorkerLock.js';
import { openSecondPool, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, natsUrl, uniquePrefix } from '../support/nats.js';
import { testWorkerConfig } from '../support/workerConfig.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));
const silent = () => pino({ level: 'silent' });
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('one worker process per SQLite file', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  const prefixes: string[] = [];
  const running: WorkerProcess[] = [];

  beforeAll(async () => {
    t = await openTestDatabase('sqlite', undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix('sqlite_one');
  });
  afterEach(async () => {
    while (running.length) await running.pop()!.kill9();
  });
  afterAll(async () => {
    for (const p of [prefix, ...prefixes]) await deleteTopology(nc, p);
    await nc?.drain();
    await t?.close();
  });

  const env = () => ({ DATABASE_URL: t.url, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix });
  const spawnServing = async () => {
    const worker = await spawnWorker(env());
    running.push(worker);
    return worker;
  };
  /** A second `pending-projector worker` on the same file, run to its exit. */
  const secondWorker = () =>
    spawnSync(process.execPath, [CLI, 'worker'], { env: { ...process.env, HEALTH_PORT: '0', ...env() }, encoding: 'utf8', timeout: 60_000 });

  it('refuses a second worker process in one line naming the first (exit 2) while the first goes on serving', async () => {
    const first = await spawnServing();
    const second = secondWorker();
    expect(second.status).toBe(2);
    const file = path.resolve(t.url.slice('sqlite:'.length));
    expect(second.stderr.split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^pending-projector: ${escape(file)} is served by worker pid ${first.child.pid} on ${escape(os.hostname())}, since \\S+: one worker process per SQLite file \\(.*lock ${escape(file)}\\.worker-lock\\)$`,
        ),
      ),
      '',
    ]);
    expect(first.child.exitCode).toBeNull();
    expect((await fetch(`http://127.0.0.1:${first.healthPort}/healthz`)).status).toBe(200);
  }, 120_000);

  it('starts again on the file after the first stopped cleanly, and after it was killed with SIGKILL', async () => {
    const first = await spawnServing();
    expect(await first.stop()).toBe(0);
    running.pop();
    const second = await spawnServing();
    await second.kill9();
    running.pop();
    const third = await spawnServing();
    expect(third.child.exitCode).toBeNull();
  }, 120_000);

  it('in one process: workers on one pool share the file, a second pool on it is refused', async () => {
    const [prefixB, prefixC] = [uniquePrefix('sqlite_one_b'), uniquePrefix('sqlite_one_c')];
    prefixes.push(prefixB, prefixC);
    const workerDb = openSecondPool(t);
    const otherDb = openSecondPool(t);
    try {
      const a = await startWorker({ db: workerDb, nc, config: testWorkerConfig(prefix), logger: silent() });
      const b = await startWorker({ db: workerDb, nc, config: testWorkerConfig(prefixB), logger: silent() });
      await expect(startWorker({ db: otherDb, nc, config: testWorkerConfig(prefixC), logger: silent() })).rejects.toBeInstanceOf(SqliteWorkerLockedError);
      await a.stop();
      // Still held by b: the pool's last worker releases it.
      await expect(startWorker({ db: otherDb, nc, config: testWorkerConfig(prefixC), logger: silent() })).rejects.toBeInstanceOf(SqliteWorkerLockedError);
      await b.stop();
      const c = await startWorker({ db: otherDb, nc, config: testWorkerConfig(prefixC), logger: silent() });
      await c.stop();
    } finally {
      await workerDb.destroy();
      await otherDb.destroy();
    }
  }, 120_000);
});
