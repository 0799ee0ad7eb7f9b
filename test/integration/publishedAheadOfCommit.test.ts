import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../../src/repository/clarifications/clarificationClaims.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { startTurn } from '../../src/repository/turns/turns.js';
import { isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createTestProjector } from '../support/projector.js';
import { RecordingPublisher } from '../support/recordingPublisher.js';
import { seedClarificationBundle, seedSession } from '../support/seed.js';

/**
 * Found by `npm run soak` (a replica killed, or its backend terminated, between a summary's publish
 * and its COMMIT): a projection publishes its replacement under the row lock, before COMMIT. When the
 * COMMIT then fails, the bus holds a revision the database never stored. If the task's state goes
 * back to what the row still says before the next projection, that projection sees no change and
 * publishes nothing: the bus keeps the uncommitted summary, a revision ahead of the row, until the
 * task's next semantic change. Here the question the user must answer is missing on the bus. The
 * projector remembers such tasks and publishes the stored summary again at their next projection.
 * A replica killed in that window forgets them; the event it never acknowledged is redelivered, and
 * the replica that takes it publishes the stored summary again.
 *
 * PostgreSQL only: a deferred constraint trigger makes exactly the COMMIT fail, after the publish.
 */
/** Records every publish; `loseNextAck` makes the next one reach the bus and still fail, as an acknowledgement lost in a server restart. */
class AckLosingPublisher extends RecordingPublisher {
  loseNextAck = false;
  override async publishSummary(update: Parameters<RecordingPublisher['publishSummary']>[0]) {
    const outcome = await super.publishSummary(update);
    if (!this.loseNextAck) return outcome;
    this.loseNextAck = false;
    throw new Error('publish acknowledgement lost');
  }
}

/** From now on every COMMIT that updated a summary row fails, after the projection published: a deferred constraint trigger. */
async function refuseCommits(t: TestDatabase) {
  await t.ctx.knex.raw(`CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused'; END $$`);
  await t.ctx.knex.raw(
    `CREATE CONSTRAINT TRIGGER refuse_commit AFTER UPDATE ON task_status_summaries DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_commit()`,
  );
}

async function allowCommits(t: TestDatabase) {
  await t.ctx.knex.raw('DROP TRIGGER refuse_commit ON task_status_summaries');
  await t.ctx.knex.raw('DROP FUNCTION refuse_commit()');
}

/** A task whose question `projector` published at revision 1 and that was then rejected, not yet projected again. */
async function questionProjectedThenRejected(t: TestDatabase, projector: { reproject(taskId: string): Promise<void> }) {
  const { taskId, sessionId } = await seedSession(t.ctx);
  const turn = await startTurn(t.ctx, sessionId);
  const first = await seedClarificationBundle(t.ctx, { sessionId, turnId: turn.id });
  await projector.reproject(taskId);
  const claim = await claimClarificationBundle(t.ctx, first.pendingId, { status: 'rejected' });
  if (!claim.claimed) throw new Error('claim failed');
  await finalizeClarificationDelivery(
    t.ctx,
    claim.rows.map((r) => r.id),
  );
  return { taskId, sessionId, turnId: turn.id };
}

describe.skipIf(!isAvailable('postgres'))('a summary published by a projection whose COMMIT failed, on postgres', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('postgres');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is replaced on the bus by the stored summary once the task is projected again', async () => {
    const publisher = new RecordingPublisher();
    const projector = createTestProjector(t.ctx, { publisher, metrics: createMetrics(), batchSize: 1, transactions: 1 });
    const { taskId, sessionId, turnId } = await questionProjectedThenRejected(t, projector);
    expect((await loadStatusSummaries(t.ctx, [taskId])).get(taskId)?.revision).toBe(1);

    // The projection of the rejection publishes revision 2 (nothing pending), then its COMMIT fails.
    await refuseCommits(t);
    await expect(projector.reproject(taskId)).rejects.toThrow();
    await allowCommits(t);
    expect(publisher.summaries.at(-1)?.summary).toMatchObject({ revision: 2 });
    expect(publisher.summaries.at(-1)?.summary.pending_action).toBeUndefined();

    // The agent asks again before the next projection: the state is what the row (revision 1) says.
    await seedClarificationBundle(t.ctx, { sessionId, turnId });
    await projector.reproject(taskId);

    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    const last = publisher.summaries.at(-1)!.summary;
    expect(last.pending_action).toBe('clarification');
    expect(last.revision).toBeGreaterThanOrEqual(stored.revision);
  });

  it('is replaced on the bus by the stored summary when the replica that published it died before its COMMIT', async () => {
    // One bus, two replicas: the first publishes revision 2 and dies before its COMMIT (here the COMMIT fails).
    const publisher = new RecordingPublisher();
    const dying = createTestProjector(t.ctx, { publisher, metrics: createMetrics(), batchSize: 1, transactions: 1 });
    const survivor = createTestProjector(t.ctx, { publisher, metrics: createMetrics(), batchSize: 1, transactions: 1 });
    const { taskId, sessionId, turnId } = await questionProjectedThenRejected(t, dying);
    await refuseCommits(t);
    await expect(
      dying.handleEvent('message.updated', { task_id: taskId, session_id: sessionId, type: 'clarification_request' }, { redelivered: false }),
    ).rejects.toThrow();
    await allowCommits(t);
    dying.stopRepublishing();
    await seedClarificationBundle(t.ctx, { sessionId, turnId });

    // A first delivery of a later event finds nothing changed and publishes nothing: the bus still says no question.
    const published = publisher.summaries.length;
    await survivor.handleEvent('message.added', { task_id: taskId, session_id: sessionId }, { redelivered: false });
    expect(publisher.summaries).toHaveLength(published);
    expect(publisher.summaries.at(-1)?.summary.pending_action).toBeUndefined();

    // The dead replica's event comes back to the survivor as a redelivery: the stored summary is published again, above the stream's revision.
    await survivor.handleEvent('message.updated', { task_id: taskId, session_id: sessionId, type: 'clarification_request' }, { redelivered: true });
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    const last = publisher.summaries.at(-1)!.summary;
    expect(last.pending_action).toBe('clarification');
    expect(last.revision).toBe(stored.revision);
    expect(stored.revision).toBeGreaterThan(1);

    // Each redelivery costs one such republish: whether the dead replica's attempt reached the stream is not known here.
    await survivor.handleEvent('message.updated', { task_id: taskId, session_id: sessionId, type: 'clarification_request' }, { redelivered: true });
    expect(publisher.summaries.at(-1)!.summary.revision).toBe(stored.revision + 1);
  });

  it('is replaced on the bus by the stored summary when a publish whose acknowledgement was lost reached it', async () => {
    const publisher = new AckLosingPublisher();
    const projector = createTestProjector(t.ctx, { publisher, metrics: createMetrics(), batchSize: 1, transactions: 1 });
    const { taskId, sessionId, turnId } = await questionProjectedThenRejected(t, projector);
    publisher.loseNextAck = true;
    await projector.reproject(taskId).catch(() => undefined);
    expect(publisher.summaries.at(-1)?.summary.pending_action).toBeUndefined();

    await seedClarificationBundle(t.ctx, { sessionId, turnId });
    await projector.reproject(taskId);

    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    const last = publisher.summaries.at(-1)!.summary;
    expect(last.pending_action).toBe('clarification');
    expect(last.revision).toBe(stored.revision);
  });
});
