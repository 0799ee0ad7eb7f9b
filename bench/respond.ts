/**
 * `npm run bench:respond`: clarification.respond for a DETACHED answer (no live waiter, so the
 * response becomes a JetStream resume command), through the bus and the real worker, against the
 * bare transactions and one bus round trip measured in the same run. USAGE below says more.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createPendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { topologyFor } from '../src/contract/subjects.js';
import { silentLogger } from '../src/logger.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../src/repository/clarificationClaims.js';
import type { RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { startTurn } from '../src/repository/turns.js';
import { startWorker } from '../src/bin/worker.js';
import { WrongAnswerError, onCleanup, parseCommandLine, progress, runBench, secs } from './benchRun.js';
import { optionChecks } from './optionChecks.js';
import { collectRunInfo, formatRunInfo } from './runInfo.js';
import { openScratchDatabase } from './scratchDatabase.js';
import { seedClarificationBundle, seedSession } from './seed/fixtures.js';
import { DIALECT_TITLE, f2, int, markdownTable, textTable, verdict, type Row } from './table.js';
import { deleteTopology } from './workerNats.js';

const USAGE = `
npm run bench:respond -- [--dialect sqlite|postgres|both] [--bundles <n>] [--concurrency <n>]

Measures, per dialect, on --bundles one-question pending bundles each:
  bare       claim + finalize, the two transactions a detached answer needs, one at a time
  rtt        one bus round trip: a request to an echo responder on the same server
  respond    clarification.respond through the bus and the worker, one at a time; its throughput at
             --concurrency requests in flight as context
Target: respond p99 <= 3 x bare p99 + rtt p99.

Options:
  --dialect      sqlite, postgres or both (default both)
  --bundles      bundles per measurement (default 400)
  --concurrency  requests in flight for the throughput (default 8)
  --help         this text

PostgreSQL: BENCH_POSTGRES_URL, else POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test; NATS:
NATS_URL (default nats://127.0.0.1:4222). Progress goes to stderr, results to stdout.
Exit code: 0 when the run completed, whatever its verdicts (PASS and FAIL are printed results);
2 for bad arguments; 1 when it could not run (a service not reachable, an error, or a wrong reply).
`;

const TARGET_BARE_P99_FACTOR = 3;

interface Options {
  dialects: DialectName[];
  bundles: number;
  concurrency: number;
  postgresUrl: string;
  natsUrl: string;
}

function parseOptions(): Options {
  const { values } = parseCommandLine(
    () =>
      parseArgs({
        strict: true,
        allowPositionals: false,
        options: {
          dialect: { type: 'string', default: 'both' },
          bundles: { type: 'string', default: '400' },
          concurrency: { type: 'string', default: '8' },
        },
      }),
    USAGE,
  );
  const check = optionChecks();
  const dialects = check.dialects(values.dialect);
  const int = check.int;
  const bundles = int('bundles', values.bundles, 1);
  const concurrency = int('concurrency', values.concurrency, 1);
  check.done();
  return {
    dialects,
    bundles,
    concurrency,
    postgresUrl: process.env.BENCH_POSTGRES_URL ?? process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
  };
}

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

const ANSWER = (q: string) => ({ question_id: q, selected_options: ['a'], custom_text: '' });

/** One RUNNING session per bundle, an open turn, and a one-question pending bundle on it. */
async function seedBundles(ctx: RepositoryContext, count: number, label: string): Promise<string[]> {
  const pendingIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const { sessionId } = await seedSession(ctx, { workspaceId: 'bench' });
    const turn = await startTurn(ctx, sessionId);
    const { pendingId } = await seedClarificationBundle(ctx, { sessionId, turnId: turn.id, pendingId: `${label}-${i}-${sessionId.slice(0, 8)}` });
    pendingIds.push(pendingId);
  }
  return pendingIds;
}

interface Figures {
  dialect: DialectName;
  bareP50: number;
  bareP99: number;
  bareOpsPerSec: number;
  rttP50: number;
  rttP99: number;
  endpointP50: number;
  endpointP99: number;
  endpointOpsPerSec: number;
}

async function measure(dialect: DialectName, nc: NatsConnection, options: Options): Promise<Figures> {
  const scratch = await openScratchDatabase(dialect, { postgresUrl: options.postgresUrl, maxConnections: 2, schemaPrefix: 'bench_respond_' });
  const drop = onCleanup(() => scratch.drop());
  // Random: deleteTopology also removes every stream whose name starts with the prefix's.
  const prefix = `benchrespond${randomUUID().replaceAll('-', '').slice(0, 8)}_${dialect}.`;
  const removeTopology = onCleanup(() => deleteTopology(nc, topologyFor(prefix)));
  const worker = await startWorker({
    db: scratch.db,
    nc,
    logger: silentLogger(),
    config: { subjectPrefix: prefix, healthPort: 0, projectionBatchSize: 16, projectionTransactions: 2, maxEventBytes: 262_144, maxDeliver: 10, ackWaitMs: 30_000, streamMaxAgeMs: 3_600_000, reconcilePageSize: 500, bootReconcile: false, respondDeadlineMs: 30_000 },
  });
  const stopWorker = onCleanup(() => worker.stop());
  try {
    progress(`[${dialect}] seeding ${options.bundles * 3} bundles into ${scratch.where}`);
    const bareIds = await seedBundles(scratch.ctx, options.bundles, 'bare');
    const latencyIds = await seedBundles(scratch.ctx, options.bundles, 'lat');
    const throughputIds = await seedBundles(scratch.ctx, options.bundles, 'thr');

    progress(`[${dialect}] bare claim + finalize x ${bareIds.length}`);
    const bare: number[] = [];
    const bareStart = performance.now();
    for (const pendingId of bareIds) {
      const t0 = performance.now();
      const claim = await claimClarificationBundle(scratch.ctx, pendingId, { status: 'answered', answers: new Map([['q1', ANSWER('q1')]]) });
      if (!claim.claimed) throw new WrongAnswerError(`bare claim of ${pendingId} lost`);
      await finalizeClarificationDelivery(scratch.ctx, claim.rows.map((r) => r.id));
      bare.push(performance.now() - t0);
    }
    const bareOpsPerSec = bareIds.length / ((performance.now() - bareStart) / 1000);

    progress(`[${dialect}] bus round trips x ${options.bundles}`);
    const echo = nc.subscribe(`${prefix}bench.echo`, { callback: (_err, m) => { m.respond(m.data); } });
    const rtt: number[] = [];
    for (let i = 0; i < options.bundles; i++) {
      const t0 = performance.now();
      await nc.request(`${prefix}bench.echo`, '{"pending_id":"x"}', { timeout: 5000 });
      rtt.push(performance.now() - t0);
    }
    echo.unsubscribe();

    progress(`[${dialect}] respond x ${latencyIds.length} one at a time, then ${throughputIds.length} at ${options.concurrency} in flight`);
    const client = createPendingProjectorClient(nc, { prefix });
    const latencies: number[] = [];
    for (const pendingId of latencyIds) {
      const t0 = performance.now();
      const reply = await client.respond({ pending_id: pendingId, answers: [ANSWER('q1')] });
      latencies.push(performance.now() - t0);
      if (!reply.ok || !reply.claimed || reply.delivery !== 'resume') throw new WrongAnswerError(`respond ${pendingId}: ${JSON.stringify(reply)}`);
    }
    const queue = [...throughputIds];
    const thrStart = performance.now();
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          const reply = await client.respond({ pending_id: id, answers: [ANSWER('q1')] });
          if (!reply.ok || !reply.claimed) throw new WrongAnswerError(`respond ${id}: ${JSON.stringify(reply)}`);
        }
      }),
    );
    const endpointOpsPerSec = throughputIds.length / ((performance.now() - thrStart) / 1000);
    return {
      dialect,
      bareP50: percentile(bare, 50),
      bareP99: percentile(bare, 99),
      bareOpsPerSec,
      rttP50: percentile(rtt, 50),
      rttP99: percentile(rtt, 99),
      endpointP50: percentile(latencies, 50),
      endpointP99: percentile(latencies, 99),
      endpointOpsPerSec,
    };
  } finally {
    await stopWorker();
    await removeTopology();
    await drop();
  }
}

const boundOf = (f: Figures) => TARGET_BARE_P99_FACTOR * f.bareP99 + f.rttP99;

function formatReport(f: Figures, options: Options): string[] {
  const bound = boundOf(f);
  const rows: Row[] = [
    [`bare claim + finalize x ${options.bundles}, one at a time, p50 / p99 (ms)`, `${f2(f.bareP50)} / ${f2(f.bareP99)}`, '', `${int(f.bareOpsPerSec)} pairs/s`],
    [`bus round trip x ${options.bundles}, p50 / p99 (ms)`, `${f2(f.rttP50)} / ${f2(f.rttP99)}`, '', 'request to an echo responder'],
    [`respond x ${options.bundles}, one at a time, p50 / p99 (ms)`, `${f2(f.endpointP50)} / ${f2(f.endpointP99)}`, '', ''],
    [`respond p99 / (${TARGET_BARE_P99_FACTOR} x bare p99 + rtt p99 = ${f2(bound)} ms)`, f2(f.endpointP99 / bound), '<= 1', verdict(f.endpointP99 <= bound)],
    [`context: respond throughput, ${options.concurrency} in flight (responds/s)`, int(f.endpointOpsPerSec), '', ''],
  ];
  return ['', `== ${DIALECT_TITLE[f.dialect]} ==`, ...textTable(rows)];
}

function formatSummary(all: readonly Figures[]): string[] {
  const cells = (fn: (f: Figures) => string) => all.map(fn);
  const lines = [
    ['bare claim + finalize transactions', ...cells((f) => `p50 ${f2(f.bareP50)}, p99 ${f2(f.bareP99)} ms`), ''],
    ['bus round trip', ...cells((f) => `p50 ${f2(f.rttP50)}, p99 ${f2(f.rttP99)} ms`), ''],
    ['`clarification.respond` through the bus', ...cells((f) => `p50 ${f2(f.endpointP50)}, p99 ${f2(f.endpointP99)} ms; ${int(f.endpointOpsPerSec)}/s`), ''],
    [`endpoint p99 ÷ (${TARGET_BARE_P99_FACTOR} × bare p99 + rtt p99)`, ...cells((f) => `${f2(f.endpointP99 / boundOf(f))} ${verdict(f.endpointP99 <= boundOf(f))}`), '≤ 1'],
  ];
  const met = all.map((f) => `${DIALECT_TITLE[f.dialect]} ${f.endpointP99 <= boundOf(f) ? 1 : 0} of 1`);
  return ['summary:', ...markdownTable(['npm run bench:respond', ...all.map((f) => DIALECT_TITLE[f.dialect]), 'target'], lines), `targets met: ${met.join(', ')}`];
}

async function main(): Promise<void> {
  const started = performance.now();
  const options = parseOptions();
  const out = (lines: readonly string[]) => process.stdout.write(`${lines.join('\n')}\n`);
  out([
    'npm run bench:respond: detached answers (resume via JetStream) against the bare transactions and a bus round trip, per dialect',
    ...formatRunInfo(await collectRunInfo(options)),
    `options:  --dialect ${options.dialects.join('+')} --bundles ${options.bundles} --concurrency ${options.concurrency}`,
  ]);
  const nc = await connect({ servers: options.natsUrl });
  onCleanup(() => nc.drain());
  const all: Figures[] = [];
  for (const dialect of options.dialects) {
    const figures = await measure(dialect, nc, options);
    out(formatReport(figures, options));
    all.push(figures);
  }
  out(['', ...formatSummary(all), `wall time ${secs(performance.now() - started)}`]);
}

runBench('npm run bench:respond', main);
