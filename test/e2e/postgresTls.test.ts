import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storesOf } from '../../src/bin/assembly.js';
import { createDatabase, type Database } from '../../src/repository/database.js';
import { runCli } from '../support/cliProcess.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedTaskWithQuestion } from '../support/seed.js';
import { REQUIRE_INTEGRATION } from '../support/services.js';
import { collectSummaries } from '../support/summaries.js';
import {
  CERTIFIED_HOST,
  UNCERTIFIED_HOST,
  findOnPath,
  findPostgresBinaries,
  startTlsPostgresCluster,
  type TlsPostgresCluster,
} from '../support/tlsPostgresCluster.js';
import { spawnWorker } from '../support/workerProcess.js';

const binDir = findPostgresBinaries();
const missing = [!binDir && 'initdb and pg_ctl (/usr/lib/postgresql/<v>/bin or PATH)', !findOnPath('openssl') && 'openssl'].filter(Boolean);

/** What the server says about the TLS of the connection a query ran on. */
async function connectionTls(db: Database): Promise<{ ssl: boolean; version: string | null }> {
  const result = await db.knex.raw<{ rows: { ssl: boolean; version: string | null }[] }>('SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
  return result.rows[0]!;
}

/** Opens `url` with one connection, runs `use` on it, and closes it either way. */
async function withDatabase<T>(url: string, options: { passwordFile?: string }, use: (db: Database) => Promise<T>): Promise<T> {
  const db = createDatabase(url, { maxConnections: 1, ...options });
  try {
    return await use(db);
  } finally {
    await db.destroy();
  }
}

// Missing programs skip the file locally; under CI the first hook fails instead.
describe.skipIf(missing.length > 0 && !REQUIRE_INTEGRATION)('PostgreSQL over TLS, against a private cluster that takes only TLS connections', () => {
  let cluster: TlsPostgresCluster;
  let verifyFull: string;

  beforeAll(async () => {
    if (missing.length > 0) throw new Error(`the TLS PostgreSQL tests need ${missing.join(' and ')}`);
    cluster = await startTlsPostgresCluster(binDir!);
    verifyFull = cluster.url(CERTIFIED_HOST, `sslmode=verify-full&sslrootcert=${encodeURIComponent(cluster.caFile)}`);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('runs migrate, doctor, a worker projecting an event, and verify with sslmode=verify-full, the password from PGPASSWORD or the password file', async () => {
    const byEnv = { DATABASE_URL: verifyFull, PGPASSWORD: cluster.password };
    const byFile = { DATABASE_URL: verifyFull, DATABASE_PASSWORD_FILE: cluster.passwordFile };

    const migrated = await runCli(['migrate'], byEnv);
    expect(migrated.stderr).toBe('');
    expect(migrated.status).toBe(0);
    const doctor = await runCli(['doctor', '--json', '--database-password-file', cluster.passwordFile], { DATABASE_URL: verifyFull });
    expect(doctor.status, doctor.stderr).toBeLessThan(2);

    const seeded = await withDatabase(verifyFull, { passwordFile: cluster.passwordFile }, async (db) => seedTaskWithQuestion(await storesOf(db)));
    const prefix = uniquePrefix('pgtls');
    let nc: NatsConnection | undefined;
    let summaries: ReturnType<typeof collectSummaries> | undefined;
    const worker = await spawnWorker({ ...byFile, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, BOOT_RECONCILE: 'false' });
    try {
      nc = await connectTestNats();
      summaries = collectSummaries(nc, prefix);
      nc.publish(`${prefix}task.updated`, envelope('task.updated', { task_id: seeded.taskId }));
      const summary = await eventually(() => summaries!.latest(seeded.taskId), 20_000, 'the summary of the seeded task');
      expect(summary.status_summary.pending_action).toBe('clarification');
    } finally {
      expect(await worker.stop()).toBe(0);
      summaries?.stop();
      if (nc) {
        await deleteTopology(nc, prefix);
        await nc.drain();
      }
    }

    const verified = await runCli(['verify', '--task', seeded.taskId], byFile);
    expect(verified.stderr).toMatch(/verified 1 task: 0 drifted/);
    expect(verified.status).toBe(0);
    for (const output of [migrated.stdout, migrated.stderr, doctor.stdout, doctor.stderr, worker.output(), verified.stdout, verified.stderr]) {
      expect(output).not.toContain(cluster.password);
    }
  });

  it('accepts, with verify-ca, a host name the certificate does not carry, and refuses it with verify-full', async () => {
    const ca = `sslrootcert=${encodeURIComponent(cluster.caFile)}`;
    const viaCa = await withDatabase(cluster.url(UNCERTIFIED_HOST, `sslmode=verify-ca&${ca}`), { passwordFile: cluster.passwordFile }, connectionTls);
    expect(viaCa.ssl).toBe(true);
    await expect(
      withDatabase(cluster.url(UNCERTIFIED_HOST, `sslmode=verify-full&${ca}`), { passwordFile: cluster.passwordFile }, connectionTls),
    ).rejects.toThrow(/does not match certificate's altnames/);
  });

  it('encrypts with require without checking the certificate, and refuses with verify-ca a chain from another CA', async () => {
    const viaRequire = await withDatabase(cluster.url(UNCERTIFIED_HOST, 'sslmode=require'), { passwordFile: cluster.passwordFile }, connectionTls);
    expect(viaRequire).toMatchObject({ ssl: true, version: expect.stringMatching(/^TLS/) });
    const otherCa = `sslrootcert=${encodeURIComponent(cluster.otherCaFile)}`;
    for (const mode of ['verify-ca', 'verify-full', 'require']) {
      // require with a root certificate checks the chain, as libpq's does.
      await expect(
        withDatabase(cluster.url(CERTIFIED_HOST, `sslmode=${mode}&${otherCa}`), { passwordFile: cluster.passwordFile }, connectionTls),
      ).rejects.toThrow(/unable to verify the first certificate/);
    }
  });

  it('is refused without TLS (sslmode=disable, or no sslmode at all)', async () => {
    for (const query of ['sslmode=disable', '']) {
      await expect(withDatabase(cluster.url(CERTIFIED_HOST, query), { passwordFile: cluster.passwordFile }, connectionTls)).rejects.toThrow(/no encryption/);
    }
  });

  it('is refused without the password, so the password sources above are what let the commands in', async () => {
    await expect(withDatabase(verifyFull, {}, connectionTls)).rejects.toThrow(/password/);
    // doctor's first statement is a lone SELECT 1, so the refusal is reported at once.
    const noPassword = await runCli(['doctor'], { DATABASE_URL: verifyFull });
    expect(noPassword.stderr).toMatch(/cannot log in to the database at .*\(DATABASE_URL \/ --database-url\): .*password/);
    expect(noPassword.status).toBe(2);
  });
});
