import type { NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { PENDING_ACTION_EPOCH_KEY } from '../../src/repository/meta.js';
import { loadStatusSummaries } from '../../src/repository/statusSummaries.js';
import { describeEachDialect, openKandevDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// Rows are seeded in the fixture's column set with canonical timestamps; Kandev's own text form is
// another part of issue #15.
describeEachDialect('the worker on a database Kandev created, on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let summaries: ReturnType<typeof collectSummaries>;
  const logs: Array<{ level: number; msg: string; index?: string; state?: string; applied?: string[] }> = [];

  beforeAll(async () => {
    t = await openKandevDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`kandev_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it("starts on Kandev's tables, having added only its own objects, and warns once per index the queries lack", async () => {
    expect(logs.find((line) => line.msg === 'applied migrations')?.applied).toEqual(['kandev_mode_0001_own_objects', 'kandev_mode_0002_prompt_receipts']);
    const warnings = logs.filter((line) => line.level === 40 && line.index !== undefined);
    expect(warnings.map((line) => [line.index, line.state])).toEqual([
      [dialect === 'sqlite' ? 'pp_turns_current_turn_order_key' : 'pp_turns_current_turn_order', 'missing'],
      ['pp_messages_pending_id', 'missing'],
      ['pp_messages_turn_type', 'missing'],
    ]);
    expect(warnings.every((line) => line.msg.includes('pending-projector migrate --add-indexes'))).toBe(true);
    const epoch = await t.ctx.knex('kandev_meta').where({ key: PENDING_ACTION_EPOCH_KEY }).first();
    expect(epoch?.value).toBe('1');
  });

  it('projects a task end to end: the question on the open turn reaches the bus and Kandev’s summary table', async () => {
    const { taskId, sessionId } = await seedSession(t.ctx);
    const turnId = await seedTurnAt(t.ctx, sessionId, { startedAt: '2026-03-04T05:06:07.123456000Z' });
    const { messages } = await seedClarificationBundle(t.ctx, { sessionId, turnId });
    nc.publish(`${prefix}message.added`, envelope('message.added', { task_id: taskId, session_id: sessionId, message_id: messages[0]!.id, type: 'clarification_request' }));
    const latest = await eventually(() => (summaries.latest(taskId)?.status_summary.pending_action === 'clarification' ? summaries.latest(taskId) : undefined));
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    expect(stored.revision).toBe(latest.status_summary.revision);
    expect(JSON.parse(stored.summary)).toEqual({ pending_action: 'clarification' });
  });
});
