import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { silentLogger } from '../../src/logger.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { seedSession } from '../support/seed.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// Raw bytes, as a caller without the typed client sends them: the typed client adds `blocked` to
// failures itself, so only the wire shows what the worker replies. The guard reads no dialect-
// specific column for a body it refuses, so one dialect is enough.
describe('session.guard over the wire', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  const maxEventBytes = 4096;

  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
    nc = await connectTestNats();
    prefix = uniquePrefix('guard_closed');
    worker = await startWorker({ db: t.db, nc, logger: silentLogger(), config: testWorkerConfig(prefix, { maxEventBytes }) });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  async function guard(body: Uint8Array | string): Promise<Record<string, unknown>> {
    const reply = await nc.request(worker.topology.serviceSubject('session.guard'), body, { timeout: 5000 });
    return reply.json<Record<string, unknown>>();
  }

  it.each([
    ['invalid JSON', '{"session_id": '],
    ['a session id of the wrong type', '{"session_id": 5}'],
    ['no session id', '{}'],
    ['an array', '[]'],
    ['an id no dialect stores alike', JSON.stringify({ session_id: 'a\u0000b' })],
    ['a body over MAX_EVENT_BYTES', JSON.stringify({ session_id: 'x'.repeat(maxEventBytes) })],
    ['bytes that are not UTF-8', new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])],
  ])('fails closed on %s: a bad_request that says blocked', async (_what, body) => {
    expect(await guard(body)).toEqual({ ok: false, error: { code: 'bad_request', message: expect.any(String) }, blocked: true, live: true });
  });

  it('fails closed on an unknown session: not_found, blocked', async () => {
    expect(await guard(JSON.stringify({ session_id: 'no-such-session' }))).toMatchObject({
      ok: false,
      error: { code: 'not_found' },
      blocked: true,
      live: true,
    });
  });

  it("answers a session without a question ok and unblocked: the fields above are the failures' own", async () => {
    const { sessionId } = await seedSession(t.ctx);
    expect(await guard(JSON.stringify({ session_id: sessionId }))).toEqual({ ok: true, session_id: sessionId, blocked: false, live: false, pending_ids: [] });
  });
});
