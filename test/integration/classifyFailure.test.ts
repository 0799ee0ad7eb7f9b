import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import knexFactory from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { classifyFailure } from '../../src/errors.js';
import { isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, uniquePrefix } from '../support/nats.js';

/** The rejection of `work`, which must reject. */
async function failureOf(work: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await work;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected the operation to fail');
}

// Real errors from the real drivers, each classified as the consumer will see it. Codes that cannot
// be provoked here (57P02, 57P03, 08xxx, ETIMEDOUT, EPIPE, EHOSTUNREACH, SQLITE_LOCKED) are covered
// with the drivers' own error classes in test/unit/errors.test.ts.
describe.skipIf(!isAvailable('postgres'))('classifying real PostgreSQL failures', () => {
  let t: TestDatabase;
  const url = () => inject('postgresUrl')!;

  beforeAll(async () => {
    t = await openTestDatabase('postgres');
    await t.ctx.knex.raw('CREATE TABLE skew (id int PRIMARY KEY, v int)');
    await t.ctx.knex.raw('INSERT INTO skew VALUES (1, 1), (2, 2)');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('retries a serialization failure (40001) of two SERIALIZABLE transactions that write skew', async () => {
    const a = await t.ctx.knex.transaction({ isolationLevel: 'serializable' });
    const b = await t.ctx.knex.transaction({ isolationLevel: 'serializable' });
    await a.raw('SELECT sum(v) FROM skew');
    await b.raw('SELECT sum(v) FROM skew');
    await a.raw('UPDATE skew SET v = v + 1 WHERE id = 1');
    await b.raw('UPDATE skew SET v = v + 1 WHERE id = 2');
    await a.commit();
    // knex resolves commit() and rejects the transaction's execution promise with COMMIT's error.
    await b.commit();
    const error = await failureOf(b.executionPromise);
    expect(error.code).toBe('40001');
    expect(classifyFailure(error)).toBe('transient');
  });

  it('retries a deadlock (40P01) of two transactions taking two rows in opposite order', async () => {
    const a = await t.ctx.knex.transaction();
    const b = await t.ctx.knex.transaction();
    await a.raw('UPDATE skew SET v = v WHERE id = 1');
    await b.raw('UPDATE skew SET v = v WHERE id = 2');
    const settled = await Promise.allSettled([a.raw('UPDATE skew SET v = v WHERE id = 2'), b.raw('UPDATE skew SET v = v WHERE id = 1')]);
    const rejected = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    await Promise.all([a.rollback().catch(() => undefined), b.rollback().catch(() => undefined)]);
    expect(rejected).toHaveLength(1);
    expect(rejected[0]!.reason.code).toBe('40P01');
    expect(classifyFailure(rejected[0]!.reason)).toBe('transient');
  });

  it('retries a query whose backend an administrator terminated (57P01)', async () => {
    const victim = new pg.Client({ connectionString: url() });
    victim.on('error', () => undefined);
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const sleeping = failureOf(victim.query('SELECT pg_sleep(30)'));
    // Terminated once the sleep runs, so the query (not the idle connection) takes the error.
    const asleep = () => t.ctx.knex.raw('SELECT 1 FROM pg_stat_activity WHERE pid = ? AND wait_event = ?', [pid, 'PgSleep']);
    while ((await asleep()).rows.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await t.ctx.knex.raw('SELECT pg_terminate_backend(?)', [pid]);
    const error = await sleeping;
    await victim.end().catch(() => undefined);
    expect(error.code).toBe('57P01');
    expect(classifyFailure(error)).toBe('transient');
  });

  it('retries a connection the server refuses for too many connections (53300)', async () => {
    const role = `pp_nolimit_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    await t.ctx.knex.raw(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 0`);
    try {
      const target = new URL(url());
      target.username = role;
      const client = new pg.Client({ connectionString: target.toString() });
      const error = await failureOf(client.connect());
      await client.end().catch(() => undefined);
      expect(error.code).toBe('53300');
      expect(classifyFailure(error)).toBe('transient');
    } finally {
      await t.ctx.knex.raw(`DROP ROLE ${role}`);
    }
  });

  it('calls invalid byte sequence (22021) unknown: retried, bounded, which is why the schemas refuse NUL before any SQL', async () => {
    const error = await failureOf(t.ctx.knex.raw('SELECT ?::text', ['task\u0000']));
    expect(error.code).toBe('22021');
    expect(classifyFailure(error)).toBe('unknown');
  });
});

describe('classifying real connection and driver failures', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('retries a connection refused (ECONNREFUSED)', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as net.AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'test' });
    const error = await failureOf(client.connect());
    expect(error.code).toBe('ECONNREFUSED');
    expect(classifyFailure(error)).toBe('transient');
  });

  it('retries a connection reset by the peer (ECONNRESET)', async () => {
    const resetting = net.createServer((socket) => socket.resetAndDestroy());
    await new Promise<void>((resolve) => resetting.listen(0, '127.0.0.1', resolve));
    const { port } = resetting.address() as net.AddressInfo;
    try {
      const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'test' });
      client.on('error', () => undefined);
      const error = await failureOf(client.connect());
      expect(error.code).toBe('ECONNRESET');
      expect(classifyFailure(error)).toBe('transient');
    } finally {
      await new Promise((resolve) => resetting.close(resolve));
    }
  });

  it('retries SQLITE_BUSY from a second connection writing while the first holds the write lock', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-busy-'));
    dirs.push(dir);
    const file = path.join(dir, 'busy.db');
    const holder = new BetterSqlite3(file);
    const other = new BetterSqlite3(file, { timeout: 0 });
    try {
      holder.exec('CREATE TABLE t (x)');
      holder.exec('BEGIN IMMEDIATE');
      let error: (Error & { code?: string }) | undefined;
      try {
        other.exec('INSERT INTO t VALUES (1)');
      } catch (err) {
        error = err as Error & { code?: string };
      }
      expect(error?.code).toBe('SQLITE_BUSY');
      expect(classifyFailure(error)).toBe('transient');
    } finally {
      holder.close();
      other.close();
    }
  });

  it('retries a knex pool wait that timed out (KnexTimeoutError)', async () => {
    const knex = knexFactory({
      client: 'better-sqlite3',
      connection: { filename: ':memory:' },
      useNullAsDefault: true,
      pool: { min: 0, max: 1 },
      acquireConnectionTimeout: 50,
    });
    const holding = await knex.transaction();
    try {
      const error = await failureOf(knex.raw('SELECT 1'));
      expect(error.name).toBe('KnexTimeoutError');
      expect(classifyFailure(error)).toBe('transient');
    } finally {
      await holding.rollback();
      await knex.destroy();
    }
  });
});

describe('classifying real NATS failures', () => {
  let nc: NatsConnection;
  const prefix = uniquePrefix('classify');
  beforeAll(async () => {
    nc = await connectTestNats();
  });
  afterAll(async () => {
    await nc?.drain();
  });

  it('retries a request nobody answers in time (TimeoutError), core or JetStream', async () => {
    // A subscriber that never replies: without one, the server answers "no responders" at once.
    const silent = nc.subscribe(`${prefix}silent`);
    try {
      const request = await failureOf(nc.request(`${prefix}silent`, undefined, { timeout: 100 }));
      expect(request.name).toBe('TimeoutError');
      expect(classifyFailure(request)).toBe('transient');
      const publish = await failureOf(jetstream(nc).publish(`${prefix}silent`, undefined, { timeout: 100 }));
      expect(publish.name).toBe('TimeoutError');
      expect(classifyFailure(publish)).toBe('transient');
    } finally {
      silent.unsubscribe();
    }
  });

  it('calls "no responders" unknown: retried, bounded (a missing stream may come back, or not)', async () => {
    const error = await failureOf(nc.request(`${prefix}nobody`, undefined, { timeout: 1000 }));
    expect(error.name).toBe('RequestError');
    expect(classifyFailure(error)).toBe('unknown');
  });
});
