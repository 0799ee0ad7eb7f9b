/**
 * `npm run bench:respond`: clarification.respond for a DETACHED answer (no live waiter, so the
 * response becomes a JetStream resume command), through the bus and the real worker, against the
 * bare transactions and one bus round trip measured in the same run.
 */
import { startWorker } from '../src/bin/worker.js';
import { createPendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { topologyFor } from '../src/contract/subjects.js';
import { silentLogger } from '../src/logger.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../src/repository/clarifications/clarificationClaims.js';
import type { RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { startTurn } from '../src/repository/turns/turns.js';
import { benchTopology, benchWorkerConfig, busRoundTrips } from './bus.js';
import {
  WrongAnswerError,
  f2,
  inFlight,
  int,
  latencyCell,
  latencyOf,
  onCleanup,
  pair,
  progress,
  runBench,
  timeEach,
  verdict,
  type BenchServices,
  type DialectResult,
} from './harness.js';
import { openScratchDatabase } from './scratchDatabase.js';
import { seedClarificationBundle, seedSession } from './seed/fixtures.js';

const TARGET_BARE_P99_FACTOR = 3;
const ANSWER = { question_id: 'q1', selected_options: ['a'], custom_text: '' };

interface Options {
  bundles: number;
  concurrency: number;
}

/** One RUNNING session per bundle, an open turn, and a one-question pending bundle on it. */
async function seedBundles(ctx: RepositoryContext, count: number, label: string): Promise<string[]> {
  const pendingIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const { sessionId } = await seedSession(ctx, { workspaceId: 'bench' });
    const turn = await startTurn(ctx, sessionId);
    pendingIds.push((await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, pendingId: `${label}-${i}-${sessionId.slice(0, 8)}` })).pendingId);
  }
  return pendingIds;
}

async function measure(dialect: DialectName, options: Options, services: BenchServices): Promise<DialectResult> {
  const nc = await services.nats();
  const scratch = await openScratchDatabase(dialect, { postgresUrl: services.postgresUrl, maxConnections: 2, schemaPrefix: 'bench_respond_' });
  const drop = onCleanup(() => scratch.drop());
  const { prefix, remove } = benchTopology(nc, 'benchrespond', dialect);
  const worker = await startWorker({ db: scratch.db, nc, logger: silentLogger(), config: benchWorkerConfig(prefix, { projectionTransactions: 2 }) });
  const stopWorker = onCleanup(() => worker.stop());
  try {
    const n = options.bundles;
    progress(`[${dialect}] seeding ${n * 3} bundles into ${scratch.where}`);
    const bareIds = await seedBundles(scratch.ctx, n, 'bare');
    const latencyIds = await seedBundles(scratch.ctx, n, 'lat');
    const throughputIds = await seedBundles(scratch.ctx, n, 'thr');

    progress(`[${dialect}] bare claim + finalize x ${n}`);
    const bare = latencyOf(
      await timeEach(bareIds, async (pendingId) => {
        const claim = await claimClarificationBundle(scratch.ctx, pendingId, { status: 'answered', answers: new Map([['q1', ANSWER]]) });
        if (!claim.claimed) throw new WrongAnswerError(`bare claim of ${pendingId} lost`);
        await finalizeClarificationDelivery(
          scratch.ctx,
          claim.rows.map((r) => r.id),
        );
      }),
    );
    progress(`[${dialect}] bus round trips x ${n}`);
    const rtt = latencyOf(await busRoundTrips(nc, prefix, '{"pending_id":"x"}', n));

    progress(`[${dialect}] respond x ${n} one at a time, then ${n} at ${options.concurrency} in flight`);
    const client = createPendingProjectorClient(nc, { prefix });
    const respond = async (pendingId: string, resumes: boolean) => {
      const reply = await client.respond({ pending_id: pendingId, answers: [ANSWER] });
      if (!reply.ok || !reply.claimed || (resumes && reply.delivery !== 'resume')) throw new WrongAnswerError(`respond ${pendingId}: ${JSON.stringify(reply)}`);
    };
    const endpoint = latencyOf(await timeEach(latencyIds, (id) => respond(id, true)));
    const concurrentOpsPerSec = await inFlight(throughputIds, options.concurrency, (id) => respond(id, false));

    const bound = TARGET_BARE_P99_FACTOR * bare.p99 + rtt.p99;
    const met = endpoint.p99 <= bound;
    return {
      dialect,
      rows: [
        [`bare claim + finalize x ${n}, one at a time, p50 / p99 (ms)`, pair(bare), '', `${int(bare.opsPerSec)} pairs/s`],
        [`bus round trip x ${n}, p50 / p99 (ms)`, pair(rtt), '', 'request to an echo responder'],
        [`respond x ${n}, one at a time, p50 / p99 (ms)`, pair(endpoint), '', ''],
        [`respond p99 / (${TARGET_BARE_P99_FACTOR} x bare p99 + rtt p99 = ${f2(bound)} ms)`, f2(endpoint.p99 / bound), '<= 1', verdict(met)],
        [`context: respond throughput, ${options.concurrency} in flight (responds/s)`, int(concurrentOpsPerSec), '', ''],
      ],
      summary: [
        ['bare claim + finalize transactions', latencyCell(bare), ''],
        ['bus round trip', latencyCell(rtt), ''],
        ['`clarification.respond` through the bus', `${latencyCell(endpoint)}; ${int(concurrentOpsPerSec)}/s`, ''],
        [`endpoint p99 ÷ (${TARGET_BARE_P99_FACTOR} × bare p99 + rtt p99)`, `${f2(endpoint.p99 / bound)} ${verdict(met)}`, '≤ 1'],
      ],
      checks: [met],
    };
  } finally {
    await stopWorker();
    await remove();
    await drop();
  }
}

runBench<Options>({
  script: 'bench:respond',
  title: 'detached answers (resume via JetStream) against the bare transactions and a bus round trip, per dialect',
  options: {
    bundles: { arg: '<n>', default: '400', help: 'bundles per measurement' },
    concurrency: { arg: '<n>', default: '8', help: 'requests in flight for the throughput' },
  },
  parse: (read) => ({ bundles: read.int('bundles', 1), concurrency: read.int('concurrency', 1) }),
  measure,
});
