import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuplicateRevisionsError } from '../../src/errors.js';
import { NatsSummaryPublisher } from '../../src/events/natsSummaryPublisher.js';
import { ensureOutputTopology, summaryKey } from '../../src/events/natsTopology.js';
import { topologyFor, type Topology } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { projectTask, projectTasks } from '../../src/projectors/projectTasks.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedTaskWithQuestion } from '../support/seed.js';
import { createTestProjector } from '../support/projector.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import type { SummaryPublisher } from '../../src/projectors/ports.js';

type Published = { data: { task_id: string; status_summary: { revision: number; pending_action?: string } } };
const decode = (data: Uint8Array) => JSON.parse(new TextDecoder().decode(data)) as Published;

let nc: NatsConnection;
const prefixes: string[] = [];

beforeAll(async () => {
  nc = await connectTestNats();
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteTopology(nc, prefix);
  await nc?.drain();
});

describeEachDialect('a revision the summary stream already holds, on %s', (dialect) => {
  let t: TestDatabase;
  let topology: Topology;
  let publisher: NatsSummaryPublisher;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    const prefix = uniquePrefix(`dup_${dialect}`);
    prefixes.push(prefix);
    topology = topologyFor(prefix);
    const { summaries } = await ensureOutputTopology(nc, topology);
    publisher = new NatsSummaryPublisher(nc, topology, summaries, () => new Date().toISOString());
  });
  afterAll(async () => {
    await t.close();
  });

  /** What an attempt that published but never committed left on the stream: a payload without the question. */
  async function earlierAttempt(taskId: string, revision: number) {
    const h = headers();
    h.set('Pending-Projector-Task-Id', taskId);
    const payload = JSON.stringify({ type: 'task.status_summary.updated', data: { task_id: taskId, status_summary: { revision } } });
    const ack = await jetstream(nc).publish(topology.summarySubject, payload, { msgID: `${taskId}:${revision}`, headers: h });
    expect(ack.duplicate).toBe(false);
  }

  async function onStream(taskId: string): Promise<Published[]> {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(topology.outputStream);
    const found: Published[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(topology.outputStream, { seq }).catch(() => null);
      if (m && m.subject === topology.summarySubject && decode(m.data).data.task_id === taskId) found.push(decode(m.data));
    }
    return found;
  }

  const inBucket = async (taskId: string) => {
    const entry = await (await new Kvm(nc).open(topology.summaryBucket)).get(summaryKey(taskId));
    return entry?.value.length ? decode(entry.value).data.status_summary : undefined;
  };

  it('publishes what is true now at the next revision, and stores and puts that one', async () => {
    const { taskId } = await seedTaskWithQuestion(t.ctx);
    await earlierAttempt(taskId, 1);
    const result = await projectTask({ store: createProjectionStore(t.ctx), publisher, logger: silentLogger() }, taskId);
    expect(result).toMatchObject({ outcome: 'changed', revision: 2 });
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    expect(stored.revision).toBe(2);
    expect(JSON.parse(stored.summary)).toEqual({ pending_action: 'clarification' });
    // Stream subscribers get revision 1 as the earlier attempt left it, then the truth at 2.
    expect((await onStream(taskId)).map((m) => [m.data.status_summary.revision, m.data.status_summary.pending_action])).toEqual([
      [1, undefined],
      [2, 'clarification'],
    ]);
    expect(await inBucket(taskId)).toMatchObject({ revision: 2, pending_action: 'clarification' });
  });

  it('republishes a task whose refused attempt reached the stream when the truth returns to what its row says, even if another replica sees the redelivery', async () => {
    const { taskId, sessionId } = await seedTaskWithQuestion(t.ctx);
    const store = createProjectionStore(t.ctx);
    await projectTask({ store, publisher, logger: silentLogger() }, taskId);
    // The stream stores this replica's next attempt, and then its acknowledgement is lost (or the
    // KV put after it fails): the attempt is refused and the row put back at revision 1.
    let loseNextAck = true;
    const losing: SummaryPublisher = {
      publishSessionPendingActions: (updates) => publisher.publishSessionPendingActions(updates),
      async publishSummary(update) {
        const outcome = await publisher.publishSummary(update);
        if (!loseNextAck) return outcome;
        loseNextAck = false;
        throw new Error('the acknowledgement was lost');
      },
    };
    const replica = createTestProjector(t.ctx, { publisher: losing, batchSize: 4, transactions: 1, connections: 2, republishAfterMs: 200 });
    const other = createTestProjector(t.ctx, { publisher, batchSize: 4, transactions: 1, connections: 2 });
    try {
      await setSessionState(t.ctx, sessionId, 'IDLE');
      await expect(replica.reproject(taskId)).rejects.toThrow(/acknowledgement was lost/);
      expect((await onStream(taskId)).map((m) => [m.data.status_summary.revision, m.data.status_summary.pending_action])).toEqual([
        [1, 'clarification'],
        [2, undefined],
      ]);
      // The truth returns to what the row (revision 1) says; the redelivered event reaches the other
      // replica, which finds nothing to change.
      await setSessionState(t.ctx, sessionId, 'RUNNING');
      await other.reproject(taskId);
      // The replica that saw its attempt refused projects the task again by itself, and publishes
      // what is true now past the revision its attempt left on the stream.
      const last = await eventually(
        async () => {
          await replica.whenIdle();
          const found = (await onStream(taskId)).at(-1)!.data.status_summary;
          return found.revision > 2 ? found : undefined;
        },
        10_000,
        'the refused attempt to be superseded on the stream',
      );
      expect(last).toMatchObject({ revision: 3, pending_action: 'clarification' });
      const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
      expect(stored.revision).toBe(3);
      expect(await inBucket(taskId)).toMatchObject({ revision: 3, pending_action: 'clarification' });
    } finally {
      replica.stopRepublishing();
      await Promise.all([replica.whenIdle(), other.whenIdle()]);
    }
  });

  it('gives up after three more revisions, leaving nothing stored, and the others of the batch commit', async () => {
    const { taskId: stuck } = await seedTaskWithQuestion(t.ctx);
    const { taskId: fine } = await seedTaskWithQuestion(t.ctx);
    for (let revision = 1; revision <= 4; revision++) await earlierAttempt(stuck, revision);
    const batch = await projectTasks({ store: createProjectionStore(t.ctx), publisher, logger: silentLogger() }, [stuck, fine]);
    const refused = batch.get(stuck)!;
    expect(refused.outcome).toBe('bus_refused');
    const error = (refused as { error: unknown }).error;
    expect(error).toBeInstanceOf(DuplicateRevisionsError);
    expect(String(error)).toMatch(/revisions 1-4/);
    expect(batch.get(fine)).toMatchObject({ outcome: 'changed', revision: 1 });
    const stored = await loadStatusSummaries(t.ctx, [stuck, fine]);
    expect(stored.has(stuck)).toBe(false);
    expect(stored.get(fine)?.revision).toBe(1);
    expect(await inBucket(stuck)).toBeUndefined();
  });
});
