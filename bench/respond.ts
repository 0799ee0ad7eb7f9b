/**
 * `npm run bench:respond`: clarification.respond for a DETACHED answer (no live waiter, so the
 * response becomes a JetStream resume command), through the bus and the real worker, on each
 * dialect; and, measured in the same run, a bare claim + finalize transaction pair and one bus
 * round trip. Target: endpoint p99 <= 3 x bare p99 + bus round-trip p99.
 *
 *   npm run bench:respond -- [--dialect sqlite|postgres|both] [--bundles N] [--concurrency C]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createPendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { topologyFor, topologyStreams } from '../src/events/subjects.js';
import { silentLogger } from '../src/logger.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../src/repository/clarificationClaims.js';
import type { RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { createMessage } from '../src/repository/messages.js';
import { createSession, createTask } from '../src/repository/tasks.js';
import { startTurn } from '../src/repository/turns.js';
import { startWorker } from '../src/bin/worker.js';
import { dropAllBenchDatabases, openBenchDatabase } from './benchDatabase.js';

const { values } = parseArgs({
  options: {
    dialect: { type: 'string', default: 'both' },
    bundles: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '8' },
  },
});
const dialects: DialectName[] = values.dialect === 'both' ? ['sqlite', 'postgres'] : [values.dialect as DialectName];
const bundles = Number(values.bundles);
const concurrency = Number(values.concurrency);
const postgresUrl = process.env.BENCH_POSTGRES_URL ?? process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const progress = (line: string) => process.stderr.write(`${line}\n`);

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

const ANSWER = (q: string) => ({ question_id: q, selected_options: ['a'], custom_text: '' });

/** One RUNNING session per bundle, an open turn, and a one-question pending bundle on it. */
async function seedBundles(ctx: RepositoryContext, count: number, label: string): Promise<string[]> {
  const pendingIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const task = await createTask(ctx, { workspaceId: 'bench', title: `${label} ${i}` });
    const session = await createSession(ctx, { taskId: task.id, state: 'RUNNING', isPrimary: true });
    const turn = await startTurn(ctx, session.id);
    const pendingId = `${label}-${i}-${task.id.slice(0, 8)}`;
    await createMessage(ctx, {
      sessionId: session.id,
      turnId: turn.id,
      type: 'clarification_request',
      requestsInput: true,
      content: 'Which?',
      metadata: {
        pending_id: pendingId,
        question_id: 'q1',
        question: { id: 'q1', title: 'Which', prompt: 'Which one?', options: [{ option_id: 'a', label: 'A' }, { option_id: 'b', label: 'B' }] },
        question_index: 0,
        question_total: 1,
        status: 'pending',
      },
    });
    pendingIds.push(pendingId);
  }
  return pendingIds;
}

interface Figures {
  bareP50: number;
  bareP99: number;
  bareOpsPerSec: number;
  rttP99: number;
  endpointP50: number;
  endpointP99: number;
  endpointOpsPerSec: number;
}

async function measure(dialect: DialectName, nc: NatsConnection): Promise<Figures> {
  const bench = await openBenchDatabase(dialect, postgresUrl);
  const prefix = `bench_respond_${dialect}_${process.pid}.`;
  const topology = topologyFor(prefix);
  const worker = await startWorker({
    db: bench.db,
    nc,
    logger: silentLogger(),
    config: { subjectPrefix: prefix, healthPort: 0, projectionBatchSize: 16, projectionTransactions: 2, maxEventBytes: 262_144, maxDeliver: 10, ackWaitMs: 30_000, streamMaxAgeMs: 3_600_000, reconcilePageSize: 500, bootReconcile: false, respondDeadlineMs: 30_000 },
  });
  try {
    progress(`[${dialect}] seeding ${bundles * 3} bundles`);
    const bareIds = await seedBundles(bench.ctx, bundles, 'bare');
    const latencyIds = await seedBundles(bench.ctx, bundles, 'lat');
    const throughputIds = await seedBundles(bench.ctx, bundles, 'thr');

    // 1. The bare transaction pair a detached answer needs: claim, then finalize.
    const bare: number[] = [];
    const bareStart = performance.now();
    for (const pendingId of bareIds) {
      const t0 = performance.now();
      const claim = await claimClarificationBundle(bench.ctx, pendingId, { status: 'answered', answers: new Map([['q1', ANSWER('q1')]]) });
      if (!claim.claimed) throw new Error(`bare claim of ${pendingId} lost`);
      await finalizeClarificationDelivery(bench.ctx, claim.rows.map((r) => r.id));
      bare.push(performance.now() - t0);
    }
    const bareOpsPerSec = bareIds.length / ((performance.now() - bareStart) / 1000);

    // 2. One bus round trip: a request to an echo responder on the same server.
    const echo = nc.subscribe(`${prefix}bench.echo`, { callback: (_err, m) => { m.respond(m.data); } });
    const rtt: number[] = [];
    for (let i = 0; i < bundles; i++) {
      const t0 = performance.now();
      await nc.request(`${prefix}bench.echo`, '{"pending_id":"x"}', { timeout: 5000 });
      rtt.push(performance.now() - t0);
    }
    echo.unsubscribe();

    // 3. The endpoint, one request at a time (latency), then `concurrency` at a time (throughput).
    const client = createPendingProjectorClient(nc, { prefix });
    const latencies: number[] = [];
    for (const pendingId of latencyIds) {
      const t0 = performance.now();
      const reply = await client.respond({ pending_id: pendingId, answers: [ANSWER('q1')] });
      latencies.push(performance.now() - t0);
      if (!reply.ok || !reply.claimed || reply.delivery !== 'resume') throw new Error(`respond ${pendingId}: ${JSON.stringify(reply)}`);
    }
    const queue = [...throughputIds];
    const thrStart = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          const reply = await client.respond({ pending_id: id, answers: [ANSWER('q1')] });
          if (!reply.ok || !reply.claimed) throw new Error(`respond ${id}: ${JSON.stringify(reply)}`);
        }
      }),
    );
    const endpointOpsPerSec = throughputIds.length / ((performance.now() - thrStart) / 1000);
    return {
      bareP50: percentile(bare, 50),
      bareP99: percentile(bare, 99),
      bareOpsPerSec,
      rttP99: percentile(rtt, 99),
      endpointP50: percentile(latencies, 50),
      endpointP99: percentile(latencies, 99),
      endpointOpsPerSec,
    };
  } finally {
    await worker.stop();
    const jsm = await jetstreamManager(nc);
    for (const stream of topologyStreams(topology)) {
      await jsm.streams.delete(stream).catch(() => undefined);
    }
    await bench.drop();
  }
}

async function main(): Promise<void> {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  process.stdout.write(`machine: ${cpu}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}\n`);
  process.stdout.write(`bench:respond — detached answers (resume via JetStream), ${bundles} bundles per measurement, throughput at concurrency ${concurrency}\n`);
  const nc = await connect({ servers: natsUrl });
  try {
    for (const dialect of dialects) {
      const f = await measure(dialect, nc);
      const bound = 3 * f.bareP99 + f.rttP99;
      const pass = f.endpointP99 <= bound;
      process.stdout.write(
        [
          ``,
          `== ${dialect} ==`,
          `  bare claim+finalize     p50 ${f.bareP50.toFixed(2)} ms   p99 ${f.bareP99.toFixed(2)} ms   ${f.bareOpsPerSec.toFixed(0)} ops/s (sequential)`,
          `  bus round trip          p99 ${f.rttP99.toFixed(2)} ms`,
          `  respond (endpoint)      p50 ${f.endpointP50.toFixed(2)} ms   p99 ${f.endpointP99.toFixed(2)} ms (sequential)`,
          `  respond throughput      ${f.endpointOpsPerSec.toFixed(0)} responds/s at concurrency ${concurrency}`,
          `  target p99 <= 3 x bare p99 + rtt p99 = ${bound.toFixed(2)} ms: ${(f.endpointP99 / (f.bareP99 * 3 + f.rttP99)).toFixed(2)} of the bound  ${pass ? 'PASS' : 'FAIL'}`,
          '',
        ].join('\n'),
      );
    }
  } finally {
    await nc.drain();
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void dropAllBenchDatabases().finally(() => process.exit(130));
  });
}
main().catch(async (err: Error) => {
  process.stderr.write(`bench:respond failed: ${err.stack ?? err.message}\n`);
  await dropAllBenchDatabases();
  process.exit(1);
});
