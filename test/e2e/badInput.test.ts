import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { listDeadLetters, retryDeadLetter, showDeadLetter } from '../../src/events/deadLetters.js';
import { silentLogger } from '../../src/logger.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedSession } from '../support/seed.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

// Bad input must be refused alike whatever the database: an id one dialect cannot store (a NUL
// byte) once failed every delivery on PostgreSQL while SQLite took it.
describeEachDialect('bad input on the bus, over %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let summaries: ReturnType<typeof collectSummaries>;
  const encoder = new TextEncoder();

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`bad_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    worker = await startWorker({
      db: t.db,
      nc,
      logger: silentLogger(),
      config: testWorkerConfig(prefix, { projectionBatchSize: 4, maxDeliver: 3 }),
    });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  const deadLetters = async () => listDeadLetters(await jetstreamManager(nc), worker.topology);

  it('dead-letters malformed JSON, wrong types and oversized events with a reason, and keeps projecting', async () => {
    nc.publish(`${prefix}message.added`, encoder.encode('{"id": "x", not json'));
    nc.publish(`${prefix}message.added`, encoder.encode(JSON.stringify({ id: 'e1', type: 'message.added', data: { task_id: 42 } })));
    nc.publish(`${prefix}turn.started`, encoder.encode(JSON.stringify({ id: 'e2', type: 'turn.started', data: 'not an object' })));
    nc.publish(`${prefix}task.updated`, envelope('task.updated', { task_id: 'big', filler: 'x'.repeat(200 * 1024) }));
    const records = await eventually(
      async () => {
        const entries = await deadLetters();
        return entries.length >= 4 ? entries : undefined;
      },
      15_000,
      'four dead-letter records',
    );
    expect(records.map((r) => r.record.reason).sort()).toEqual(['invalid_envelope', 'invalid_envelope', 'invalid_json', 'too_large']);
    for (const { record } of records) {
      expect(record.kind).toBe('rejected');
      expect(record.stream_seq).toBeGreaterThan(0);
      expect(record.detail.length).toBeGreaterThan(0);
    }
    expect(records.find((r) => r.record.reason === 'too_large')!.record.payload_bytes).toBeGreaterThan(200 * 1024);

    const { taskId, sessionId } = await seedSession(t.ctx);
    nc.publish(`${prefix}task_session.state_changed`, envelope('task_session.state_changed', { task_id: taskId, session_id: sessionId }));
    await eventually(() => summaries.latest(taskId), 10_000, 'a projection after the bad input');
  });

  it('dead-letters an event whose task or session id holds a NUL byte, or is 10 KB long, on its first delivery, and keeps projecting', async () => {
    const { taskId, sessionId } = await seedSession(t.ctx);
    const js = jetstream(nc);
    const published = [
      await js.publish(`${prefix}task.updated`, envelope('task.updated', { task_id: `${taskId}\u0000` })),
      await js.publish(`${prefix}message.added`, envelope('message.added', { session_id: `${sessionId}\u0000`, type: 'clarification_request' })),
      await js.publish(`${prefix}task.updated`, envelope('task.updated', { task_id: 'x'.repeat(10 * 1024) })),
    ];
    const seqs = published.map((ack) => ack.seq);
    const records = await eventually(
      async () => {
        const found = (await deadLetters()).filter((e) => seqs.includes(e.record.stream_seq));
        return found.length === seqs.length ? found : undefined;
      },
      15_000,
      'a dead-letter record for each bad id',
    );
    const recordOf = (seq: number) => records.find((r) => r.record.stream_seq === seq)!.record;
    for (const [seq, detail] of [
      [seqs[0]!, /NUL/],
      [seqs[1]!, /NUL/],
      [seqs[2]!, /at most 256 characters/],
    ] as const) {
      expect(recordOf(seq)).toMatchObject({ kind: 'rejected', reason: 'invalid_id', delivery_count: 1, detail: expect.stringMatching(detail) });
    }

    nc.publish(`${prefix}task.updated`, envelope('task.updated', { task_id: taskId }));
    await eventually(() => summaries.latest(taskId), 10_000, 'a projection after the bad ids');
  });

  it("refuses a payload over the server's max_payload at publish time, and the worker stays alive", async () => {
    expect(() => nc.publish(`${prefix}message.added`, new Uint8Array(nc.info!.max_payload + 1))).toThrow(/payload/i);
    const { taskId } = await seedSession(t.ctx);
    nc.publish(`${prefix}task.created`, envelope('task.created', { task_id: taskId }));
    await eventually(() => summaries.latest(taskId), 10_000, 'a projection after the refused publish');
  });

  it('acknowledges events for unknown tasks and sessions without writing or dead-lettering', async () => {
    const before = (await deadLetters()).length;
    nc.publish(`${prefix}message.added`, envelope('message.added', { task_id: 'no-such-task', type: 'clarification_request' }));
    nc.publish(`${prefix}message.added`, envelope('message.added', { session_id: 'no-such-session' }));
    nc.publish(`${prefix}message.added`, envelope('message.added', { message_id: 'carries no ids' }));
    const jsm = await jetstreamManager(nc);
    await eventually(async () => {
      const info = await jsm.consumers.info(worker.topology.eventsStream, worker.topology.consumer);
      return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
    });
    expect((await deadLetters()).length).toBe(before);
    expect(await t.ctx.knex('task_status_summaries').where({ task_id: 'no-such-task' }).first()).toBeUndefined();
  });

  it('does not capture subjects it does not consume, so unknown event types never reach the worker', async () => {
    nc.publish(`${prefix}task.archived`, envelope('task.archived', { task_id: 'x' }));
    await nc.flush();
    const info = await (await jetstreamManager(nc)).streams.info(worker.topology.eventsStream, { subjects_filter: `${prefix}task.archived` });
    expect(info.state.subjects?.[`${prefix}task.archived`] ?? 0).toBe(0);
  });

  it('shows a dead letter with its original event and re-injects it on retry', async () => {
    const [first] = await deadLetters();
    const detail = await showDeadLetter(await jetstreamManager(nc), worker.topology, first!.id);
    expect(detail?.original?.subject).toBe(first!.record.subject);
    const retried = await retryDeadLetter(nc, worker.topology, first!.id);
    expect(retried.ok).toBe(true);
    // Still bad, so it comes back as a new record pointing at the re-injected copy.
    await eventually(async () => ((await deadLetters()).some((e) => retried.ok && e.record.stream_seq === retried.newStreamSeq) ? true : undefined));
    expect((await deadLetters()).some((e) => e.id === first!.id)).toBe(false);
  });

  it('lists dead letters from the CLI', () => {
    const out = spawnSync(process.execPath, [CLI, 'dead-letters', 'list', '--subject-prefix', prefix, '--nats-url', natsUrl()], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/invalid_json|invalid_envelope|too_large/);
    const bad = spawnSync(process.execPath, [CLI, 'dead-letters', 'retry', 'abc', '--subject-prefix', prefix, '--nats-url', natsUrl()], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/needs a record id/);
  });
});
