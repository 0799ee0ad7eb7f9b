import fc from 'fast-check';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { listDeadLetters } from '../../src/events/deadLetters.js';
import { parseEvent } from '../../src/events/parseEvent.js';
import { INBOUND_SUBJECTS } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { REPLY_ERROR_CODES } from '../../src/contract/replyErrorCodes.js';
import { ENDPOINT_REQUEST_SCHEMAS, type EndpointName } from '../../src/contract/endpoints.js';
import { ENDPOINTS } from '../../src/contract/endpoints.js';
import { parseRequest } from '../../src/contract/parseRequest.js';
import { databaseContents } from '../support/databaseContents.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { eventBytes, requestBytes } from '../support/fuzzInputs.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// One seed for the whole run, so a failure names the inputs that caused it: rerun with FUZZ_SEED=<seed>.
const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
// Fixed counts bound the run: about 1,800 requests (100 per endpoint) and 1,500 events per dialect.
const REQUESTS_PER_ENDPOINT = 100;
const EVENTS = 1500;
const REQUESTS_IN_FLIGHT = 16;
const MAX_EVENT_BYTES = 64 * 1024;
const HEALTH_EVERY = 250;

/** Runs `work` over `items`, `limit` at a time, in order of start. */
async function inPool<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: limit }, async () => {
    while (next < items.length) {
      const index = next++;
      await work(items[index]!, index);
    }
  });
  await Promise.all(lanes);
}

// `internal` is a handler's crash: no input may cause one.
const TYPED_FAILURES = REPLY_ERROR_CODES.filter((code) => code !== 'internal');

// A worker on real NATS and a real database, fed fuzzed events on its inbound subjects and fuzzed
// requests on every endpoint it serves (the same registry the unit fuzz tests walk). Everything
// must be answered with a typed reply or settled (acked or dead-lettered), nothing written, and
// /healthz must stay 200 throughout.
describeEachDialect('a worker fed thousands of fuzzed events and requests, over %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`fuzz_${dialect}`);
    worker = await startWorker({ db: t.db, nc, logger: silentLogger(), config: testWorkerConfig(prefix, { maxEventBytes: MAX_EVENT_BYTES, maxDeliver: 3 }) });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  const healthy = async () => (await fetch(`http://127.0.0.1:${worker.healthPort}/healthz`)).status;

  it(`answers every request with a typed reply, settles every event, writes nothing and stays healthy (seed ${SEED})`, async () => {
    const before = await databaseContents(t);
    const endpoints = Object.keys(ENDPOINT_REQUEST_SCHEMAS) as EndpointName[];
    const requests = endpoints.flatMap((name, i) =>
      fc.sample(requestBytes(ENDPOINT_REQUEST_SCHEMAS[name]), { numRuns: REQUESTS_PER_ENDPOINT, seed: SEED + i }).map((bytes) => ({ name, bytes })),
    );
    const events = fc.sample(fc.tuple(fc.constantFrom(...INBOUND_SUBJECTS.map((s) => s.replace('.>', '.x'))), eventBytes), { numRuns: EVENTS, seed: SEED });

    // Two endpoints write by design whatever rows exist: staging an attachment needs no parent row,
    // and retrying a dead letter re-injects an event (the fuzzed events make real dead letters).
    // Their valid bodies are left out; every other accepted body names rows that do not exist.
    const writesByDesign = new Set<string>([ENDPOINTS.attachmentStage, ENDPOINTS.deadLetterRetry]);
    const sent = requests.filter(({ name, bytes }) => !writesByDesign.has(name) || !parseRequest(bytes, ENDPOINT_REQUEST_SCHEMAS[name], MAX_EVENT_BYTES).ok);
    const outcomes = { bad_request: 0, other_error: 0, ok: 0 };
    let inputs = 0;
    const checkHealth = async () => {
      if (++inputs % HEALTH_EVERY === 0) expect(await healthy(), `healthz after ${inputs} inputs (seed ${SEED})`).toBe(200);
    };

    for (const [subject, bytes] of events) {
      nc.publish(`${prefix}${subject}`, bytes);
      if (inputs % 100 === 0) await nc.flush();
      await checkHealth();
    }
    await nc.flush();

    await inPool(sent, REQUESTS_IN_FLIGHT, async ({ name, bytes }, index) => {
      const context = `request #${index} to ${name} (seed ${SEED})`;
      const raw = await nc.request(worker.topology.serviceSubject(name), bytes, { timeout: 10_000 });
      const reply = raw.json<{ ok: boolean; error?: { code: string } }>();
      const refused = !parseRequest(bytes, ENDPOINT_REQUEST_SCHEMAS[name], MAX_EVENT_BYTES).ok;
      if (refused) expect(reply, context).toMatchObject({ ok: false, error: { code: 'bad_request' } });
      if (reply.ok) outcomes.ok++;
      else {
        expect(reply, context).toMatchObject({ ok: false, error: { code: expect.any(String), message: expect.any(String) } });
        expect(TYPED_FAILURES, `${context}: ${JSON.stringify(reply).slice(0, 500)}`).toContain(reply.error!.code);
        outcomes[reply.error?.code === 'bad_request' ? 'bad_request' : 'other_error']++;
      }
      await checkHealth();
    });

    // Every event settled: none pending, none awaiting an ack, none delivered twice.
    const jsm = await jetstreamManager(nc);
    const { state } = await jsm.streams.info(worker.topology.eventsStream);
    expect(state.messages).toBe(EVENTS);
    const settled = await eventually(
      async () => {
        const info = await jsm.consumers.info(worker.topology.eventsStream, worker.topology.consumer);
        return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.stream_seq === state.last_seq ? info : undefined;
      },
      60_000,
      'every fuzzed event settled',
    );
    expect(settled.num_redelivered).toBe(0);

    // The events the parser refuses are exactly the ones dead-lettered, each with its reason.
    const reasons: Record<string, number> = {};
    for (const [, bytes] of events) {
      const parsed = parseEvent(bytes, MAX_EVENT_BYTES);
      reasons[parsed.ok ? 'projectable' : parsed.reason] = (reasons[parsed.ok ? 'projectable' : parsed.reason] ?? 0) + 1;
    }
    const refusedEvents = EVENTS - (reasons.projectable ?? 0);
    const records = await eventually(
      async () => {
        const entries = await listDeadLetters(jsm, worker.topology, EVENTS + 10);
        return entries.length >= refusedEvents ? entries : undefined;
      },
      30_000,
      `${refusedEvents} dead-letter records`,
    );
    expect(records.length).toBe(refusedEvents);
    for (const { record } of records) expect(['too_large', 'invalid_json', 'invalid_envelope', 'invalid_id']).toContain(record.reason);

    await worker.projector.whenIdle();
    expect(await databaseContents(t)).toEqual(before);
    expect(await healthy()).toBe(200);
    // The run's figures, for the test log.
    console.info(`[fuzz ${dialect}] seed ${SEED}: ${events.length} events`, reasons, `${sent.length} requests`, outcomes);
    // Both kinds must be common, or the run would test only the parser, or only the handlers.
    expect(outcomes.bad_request).toBeGreaterThan(sent.length / 4);
    expect(outcomes.other_error + outcomes.ok).toBeGreaterThan(sent.length / 10);
  }, 180_000);
});
