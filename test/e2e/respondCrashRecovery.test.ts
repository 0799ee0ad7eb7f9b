import type { NatsConnection } from '@nats-io/transport-node';
import { afterEach, expect, it } from 'vitest';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { findMessagesByPendingId } from '../../src/repository/clarifications/clarifications.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import type { DialectName } from '../../src/repository/dialect.js';
import type { TestDatabase } from '../support/databases.js';
import { startFakeAgent, type FakeAgent } from '../support/fakeAgent.js';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, serviceContext, type SchemaKind } from '../support/rowWriters.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

async function setup(dialect: DialectName, schema: SchemaKind) {
  const t: TestDatabase = await openSchemaDatabase(dialect, schema, { file: true });
  cleanups.push(() => t.close());
  const nc: NatsConnection = await connectTestNats();
  const prefix = uniquePrefix(`crash_${dialect}`);
  cleanups.push(async () => {
    await deleteTopology(nc, prefix);
    await nc.drain();
  });
  const start = async (respondDeadlineMs: number) => {
    const w = await spawnWorker({
      DATABASE_URL: t.url,
      NATS_URL: natsUrl(),
      SUBJECT_PREFIX: prefix,
      BOOT_RECONCILE: 'false',
      RESPOND_DEADLINE_MS: String(respondDeadlineMs),
    });
    cleanups.push(() => w.stop());
    return w;
  };
  return { t, w: rowWriter(schema, t.ctx), nc, prefix, start };
}

// Beside Kandev's schema the rows are Kandev's (raw, in its timestamp text), read through the
// context the service builds there once the first worker has migrated; the assertions are the same.
describeEachSchemaAndDialect('a worker killed between claim and delivery on %s', (dialect, schema) => {
  it('restores a still-current bundle at the next start and keeps a superseded one terminal', async () => {
    const { t, w, nc, prefix, start } = await setup(dialect, schema);
    const open = async () => {
      const { sessionId } = await w.session();
      const turn = await w.startTurn(sessionId);
      const { pendingId } = await w.bundle({ sessionId, turnId: turn.id, statuses: ['pending', 'pending'] });
      return { sessionId, turnId: turn.id, pendingId };
    };
    const current = await open();
    const superseded = await open();
    let ctx: RepositoryContext = t.ctx;
    const rows = (pendingId: string) => findMessagesByPendingId(ctx, pendingId);
    const answers = [
      { question_id: 'q1', selected_options: ['a'] },
      { question_id: 'q2', selected_options: ['b'] },
    ];

    const first: WorkerProcess = await start(20_000);
    ctx = await serviceContext(t, schema);
    const agents: FakeAgent[] = [current, superseded].map((q) => startFakeAgent(nc, prefix, q.sessionId, { mode: 'silent' }));
    cleanups.push(() => agents.forEach((a) => a.stop()));
    const client = createPendingProjectorClient(nc, { prefix });
    const inFlight = [current, superseded].map((q) => client.respond({ pending_id: q.pendingId, answers }, { timeoutMs: 3000 }));
    // The agents hold the deliveries, so both claims have committed: kill -9 now.
    await eventually(() => (agents.every((a) => a.deliveries.length === 1) ? true : undefined), 10_000, 'both deliveries');
    for (const q of [current, superseded]) {
      expect((await rows(q.pendingId)).map((r) => [r.metadata.status, r.metadata.response_delivery_pending])).toEqual([
        ['answered', true],
        ['answered', true],
      ]);
    }
    await first.kill9();
    expect((await Promise.all(inFlight)).map((r) => !r.ok && r.error.code)).toEqual(['unavailable', 'unavailable']);
    // While no worker runs, the second session moves on to a newer turn.
    await w.completeTurn(superseded.turnId);
    await w.startTurn(superseded.sessionId);

    const second = await start(1000);
    await eventually(async () => ((await rows(current.pendingId)).every((r) => r.metadata.status === 'pending') ? true : undefined), 20_000, 'the recovery');
    expect((await rows(current.pendingId)).map((r) => [r.metadata.status, r.metadata.response, r.metadata.response_delivery_pending])).toEqual([
      ['pending', undefined, undefined],
      ['pending', undefined, undefined],
    ]);
    await eventually(
      async () => ((await rows(superseded.pendingId)).every((r) => r.metadata.response_delivery_pending === undefined) ? true : undefined),
      5000,
      'the release',
    );
    expect((await rows(superseded.pendingId)).map((r) => [r.metadata.status, r.metadata.response_undelivered])).toEqual([
      ['answered', true],
      ['answered', true],
    ]);
    // Recovery may run in two passes (claims younger than the grace window are deferred), and its log
    // lines reach us through a pipe after the rows changed: sum the passes once both have reported.
    const recovered = () =>
      second
        .output()
        .split('\n')
        .filter((line) => line.includes('clarification delivery recovery finished'))
        .map((line) => JSON.parse(line) as { restored: number; finalized: number; abandoned: number })
        .reduce((sum, r) => ({ restored: sum.restored + r.restored, finalized: sum.finalized + r.finalized, abandoned: sum.abandoned + r.abandoned }), {
          restored: 0,
          finalized: 0,
          abandoned: 0,
        });
    await eventually(() => (recovered().restored + recovered().abandoned === 2 ? true : undefined), 10_000, 'the recovery log');
    expect(recovered()).toEqual({ restored: 1, finalized: 0, abandoned: 1 });

    const listed = await client.listPending({ limit: 10 });
    expect(listed.ok && listed.bundles.map((b) => b.pending_id)).toEqual([current.pendingId]);
    agents[0]!.mode = 'confirm';
    expect(await client.respond({ pending_id: current.pendingId, answers })).toMatchObject({ ok: true, claimed: true, delivery: 'live' });
    // The superseded claim's answer never reached the agent: a retry is a conflict, not a replay.
    expect(await client.respond({ pending_id: superseded.pendingId, answers })).toMatchObject({ ok: false, error: { code: 'conflict' } });
  });
});
