import { randomUUID } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { silentLogger } from '../../src/logger.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { repositoryWriter } from '../support/rowWriters.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/**
 * The one reply policy, end to end: a transient database failure in the middle of a request is
 * answered `unavailable` by an endpoint of each family (clarification, plan comment, message.send,
 * queue, task), so a caller retries it, whichever endpoint met the outage. The failures are real:
 * on PostgreSQL the request's backend is terminated (57P01) while it waits on a lock the test holds;
 * on SQLite another connection holds the write lock until the worker's busy timeout gives up
 * (SQLITE_BUSY).
 */
describeEachDialect('the reply to a transient database failure on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;

  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix(`failures_${dialect}`);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 60_000, respondTimeoutMs: 60_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  /** Runs `request` while the database fails it: the reply it got. */
  async function duringFailure<R>(request: () => Promise<R>): Promise<R> {
    return dialect === 'postgres' ? duringTerminatedBackends(request) : duringHeldWriteLock(request);
  }

  /**
   * Locks every table of the test's schema, then terminates each backend that waits on that lock
   * until the request is answered: the query in flight fails with 57P01, as when an administrator
   * or a failover ends a connection. Only backends waiting on this test's lock are terminated.
   */
  async function duringTerminatedBackends<R>(request: () => Promise<R>): Promise<R> {
    const holder = new pg.Client({ connectionString: inject('postgresUrl')! });
    holder.on('error', () => undefined);
    await holder.connect();
    try {
      const tables = await holder.query<{ tablename: string }>('SELECT tablename FROM pg_tables WHERE schemaname = $1', [t.searchPath]);
      await holder.query('BEGIN');
      await holder.query(
        `LOCK TABLE ${tables.rows.map((r) => `${holder.escapeIdentifier(t.searchPath!)}.${holder.escapeIdentifier(r.tablename)}`).join(', ')} IN ACCESS EXCLUSIVE MODE`,
      );
      let answered = false;
      const reply = request().finally(() => {
        answered = true;
      });
      while (!answered) {
        await holder.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return await reply;
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }

  /** Holds SQLite's write lock from another connection while the request runs. */
  async function duringHeldWriteLock<R>(request: () => Promise<R>): Promise<R> {
    const holder = new BetterSqlite3(t.db.sqliteFile!);
    try {
      holder.exec('BEGIN IMMEDIATE');
      return await request();
    } finally {
      if (holder.inTransaction) holder.exec('ROLLBACK');
      holder.close();
    }
  }

  const unavailable = { ok: false, error: { code: 'unavailable' } };

  it('answers unavailable from a clarification endpoint (clarification.respond)', async () => {
    const w = repositoryWriter(t.ctx);
    const seeded = await w.session();
    const turn = await w.startTurn(seeded.sessionId);
    const bundle = await w.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: ['pending'] });
    const request = { pending_id: bundle.pendingId, answers: [{ question_id: 'q1', selected_options: ['a'], custom_text: '' }] };
    expect(await duringFailure(() => client.respond(request))).toMatchObject(unavailable);
  });

  it('answers unavailable from a plan-comment endpoint (plan_comment.create)', async () => {
    const task = await seedPlanTask(t.ctx);
    const request = { task_id: task.taskId, plan_id: task.planId, comment_id: `c-${randomUUID()}`, body: 'tighten step 2' };
    expect(await duringFailure(() => client.createPlanComment(request))).toMatchObject(unavailable);
    // Nothing was written: the same request, sent again, creates the comment.
    expect(await client.createPlanComment(request)).toMatchObject({ ok: true, replayed: false });
  });

  it('answers unavailable from message.send', async () => {
    const task = await seedPlanTask(t.ctx);
    const request = { session_id: task.sessionId, caller_id: randomUUID(), content: 'run the tests' };
    expect(await duringFailure(() => client.sendMessage(request))).toMatchObject(unavailable);
  });

  it('answers unavailable from a queue endpoint (queue.enqueue)', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const request = { session_id: task.sessionId, caller_id: randomUUID(), content: 'after this turn' };
    expect(await duringFailure(() => client.enqueue(request))).toMatchObject(unavailable);
  });

  it('answers unavailable from a task endpoint (task.reproject)', async () => {
    const task = await seedPlanTask(t.ctx);
    expect(await duringFailure(() => client.reproject({ task_id: task.taskId }))).toMatchObject(unavailable);
    expect(await client.reproject({ task_id: task.taskId })).toEqual({ ok: true, task_id: task.taskId });
  });
});
