/**
 * `npm run bench:send`: message.send carrying 5 plan comments, through the bus and the real worker,
 * against the bare transaction of the same writes and one bus round trip measured in the same run,
 * plus the admission lease's cost alone. USAGE below says more.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { startWorker } from '../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { NatsPlanCommentPublisher } from '../src/events/natsPlanCommentPublisher.js';
import { topologyFor } from '../src/events/subjects.js';
import { silentLogger } from '../src/logger.js';
import { systemClock } from '../src/timestamps.js';
import { createTaskAdmission } from '../src/repository/admission/taskAdmission.js';
import type { DialectName } from '../src/repository/dialect.js';
import { openPlanCommentStore, type PlanCommentStore } from '../src/repository/planCommentStore.js';
import type { RepositoryContext } from '../src/repository/context.js';
import { formatPlanCommentPrompt } from '../src/turns/planCommentPrompt.js';
import { WrongAnswerError, onCleanup, parseCommandLine, progress, runBench, secs } from './benchRun.js';
import { optionChecks } from './optionChecks.js';
import { collectRunInfo, formatRunInfo } from './runInfo.js';
import { openScratchDatabase, type ScratchDatabase } from './scratchDatabase.js';
import { seedCommentedTask, type SeededCommentedTask } from './seed/fixtures.js';
import { advisoryLockRoundTrips, bareAcceptance, discardReceipts, leaseAlone, repositorySend, timeEach, type Timed } from './sendParts.js';
import { DIALECT_TITLE, f2, int, markdownTable, textTable, verdict, type Row } from './table.js';
import { deleteTopology } from './workerNats.js';

const USAGE = `
npm run bench:send -- [--dialect sqlite|postgres|both] [--sends <n>] [--concurrency <n>] [--pool <n>]

Measures, per dialect, on --sends tasks each (one IDLE session, a plan, 5 plan comments):
  bare       the writes of an accepted send in one transaction, one at a time: the 5 comment rows
             deleted at their versions, comments_revision bumped, the turn, the prompt sequence
             number, the user message, the receipt row (no reads, no locks, no checks)
  rtt        one bus round trip: a request to an echo responder on the same server
  lease      the admission lease alone, around nothing (task + caller-id keys); PostgreSQL also:
             the advisory lock + unlock of those keys on one reserved connection
  repo send  context: the lease around acceptPrompt, no bus
  publish    context: the task_plan.comments_updated JetStream publish a send issues after COMMIT,
             alone (on a random task id, into this run's own output stream); the reply does not
             wait for its acknowledgement
  send       message.send with 5 plan_comment_refs through the bus and the worker, one at a time;
             its throughput at --concurrency requests in flight (each on its own task)
Target: send p99 <= 3 x bare p99 + rtt p99 (no turn-start hook configured).
The figures without the bus (bare, lease, repo send) are taken before the worker starts: its prompt
dispatcher would deliver the direct receipts they write to the agent stream in the background,
during the figures through the bus. Those receipts are deleted before it starts.

Options:
  --dialect      sqlite, postgres or both (default both)
  --sends        tasks per measurement (default 300)
  --concurrency  requests in flight for the throughput (default 8)
  --pool         PostgreSQL pool size of the worker and the bench, at least 2 (default 4)
  --help         this text

PostgreSQL: BENCH_POSTGRES_URL, else POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test; NATS:
NATS_URL (default nats://127.0.0.1:4222). Progress goes to stderr, results to stdout.
Exit code: 0 when the run completed, whatever its verdicts (PASS and FAIL are printed results);
2 for bad arguments; 1 when it could not run (a service not reachable, an error, or a wrong reply).
`;

const TARGET_BARE_P99_FACTOR = 3;
const COMMENTS_PER_SEND = 5;
const LOCK_TIMEOUT_MS = 5_000;
const TYPED = 'Please address these before you go on.';

interface Options {
  dialects: DialectName[];
  sends: number;
  concurrency: number;
  pool: number;
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
          sends: { type: 'string', default: '300' },
          concurrency: { type: 'string', default: '8' },
          pool: { type: 'string', default: '4' },
        },
      }),
    USAGE,
  );
  const check = optionChecks();
  const dialects = check.dialects(values.dialect);
  const int = check.int;
  const sends = int('sends', values.sends, 1);
  const concurrency = int('concurrency', values.concurrency, 1);
  const pool = int('pool', values.pool, 2);
  check.done();
  return {
    dialects,
    sends,
    concurrency,
    pool,
    postgresUrl: process.env.BENCH_POSTGRES_URL ?? process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
  };
}

function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

interface Latency {
  p50: number;
  p99: number;
  opsPerSec: number;
}

const latencyOf = (t: Timed): Latency => ({ p50: percentile(t.samples, 50), p99: percentile(t.samples, 99), opsPerSec: t.opsPerSec });

async function seedTasks(ctx: RepositoryContext, store: PlanCommentStore, count: number): Promise<SeededCommentedTask[]> {
  const tasks: SeededCommentedTask[] = [];
  for (let i = 0; i < count; i++) tasks.push(await seedCommentedTask(ctx, store, { comments: COMMENTS_PER_SEND, workspaceId: 'bench' }));
  return tasks;
}

/** The visible prompt a send of `task`'s comments stores (the bare transaction writes text of this size). */
async function promptOf(store: PlanCommentStore, task: SeededCommentedTask): Promise<string> {
  const snapshot = await store.getSnapshot(task.taskId);
  if (!snapshot.ok) throw new WrongAnswerError(`snapshot of ${task.taskId}: ${JSON.stringify(snapshot)}`);
  return formatPlanCommentPrompt(
    snapshot.snapshot.comments.map((c) => ({ id: c.id, body: c.body, selected_text: c.selectedText, created_at: c.createdAt })),
    TYPED,
  );
}

interface Figures {
  dialect: DialectName;
  bare: Latency;
  rtt: Latency;
  lease: Latency;
  /** PostgreSQL only. */
  advisory?: Latency;
  repoSend: Latency;
  /** The task_plan.comments_updated publish a send makes after COMMIT, alone. */
  publish: Latency;
  endpoint: Latency;
  /** Sends per second with --concurrency in flight. */
  endpointConcurrentOpsPerSec: number;
}

/** One message.send carrying `task`'s comments; anything but a fresh acceptance that consumed all of them is a wrong answer. */
async function sendOnce(client: PendingProjectorClient, task: SeededCommentedTask): Promise<void> {
  const callerId = randomUUID();
  const reply = await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: TYPED, plan_comment_refs: task.refs });
  if (!reply.ok || reply.replayed || reply.receipt_id !== callerId || reply.message_id !== callerId || reply.plan_comments?.comments.length !== 0) {
    throw new WrongAnswerError(`message.send on task ${task.taskId}: ${JSON.stringify(reply)}`);
  }
}

async function sendsInFlight(client: PendingProjectorClient, tasks: readonly SeededCommentedTask[], concurrency: number): Promise<number> {
  const queue = [...tasks];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let task = queue.shift(); task !== undefined; task = queue.shift()) await sendOnce(client, task);
    }),
  );
  return tasks.length / ((performance.now() - start) / 1000);
}

async function measure(dialect: DialectName, nc: NatsConnection, options: Options): Promise<Figures> {
  const scratch = await openScratchDatabase(dialect, { postgresUrl: options.postgresUrl, maxConnections: options.pool, schemaPrefix: 'bench_send_' });
  const drop = onCleanup(() => scratch.drop());
  try {
    const store = await openPlanCommentStore(scratch.ctx);
    const receiptTable = store.schema.receiptTable;
    if (!receiptTable) throw new WrongAnswerError(`the scratch database has no receipt table: ${JSON.stringify(store.schema)}`);
    // The bench's own lease shares the worker's in-process registry (it is per pool).
    const admission = createTaskAdmission(scratch.db, { lockTimeoutMs: LOCK_TIMEOUT_MS });

    progress(`[${dialect}] seeding ${options.sends * 4} tasks with ${COMMENTS_PER_SEND} plan comments each into ${scratch.where}`);
    const bareTasks = await seedTasks(scratch.ctx, store, options.sends);
    const repoTasks = await seedTasks(scratch.ctx, store, options.sends);
    const latencyTasks = await seedTasks(scratch.ctx, store, options.sends);
    const throughputTasks = await seedTasks(scratch.ctx, store, options.sends);
    const prompt = await promptOf(store, bareTasks[0]!);

    // Everything without the bus comes first, while no worker (so no prompt dispatcher) exists: the
    // receipts these write would otherwise be delivered in the background, during the later figures.
    progress(`[${dialect}] bare transaction x ${bareTasks.length}`);
    const bare = await timeEach(bareTasks, (task) => bareAcceptance(scratch.ctx, receiptTable, task, prompt));

    progress(`[${dialect}] lease alone x ${options.sends}${dialect === 'postgres' ? ', advisory lock + unlock x the same' : ''}`);
    const lease = await leaseAlone(admission, options.sends);
    const advisory = dialect === 'postgres' ? await advisoryLockRoundTrips(scratch.db, options.sends) : undefined;

    progress(`[${dialect}] repository send (lease + acceptPrompt) x ${repoTasks.length}`);
    const repoSend = await timeEach(repoTasks, (task) => repositorySend(admission, store, task, TYPED));

    const discarded = await discardReceipts(scratch.ctx, receiptTable);
    if (discarded !== bareTasks.length + repoTasks.length) {
      throw new WrongAnswerError(`expected the ${bareTasks.length + repoTasks.length} direct receipts of the bare transaction and the repository send, found ${discarded}`);
    }

    const throughTheBus = await measureThroughTheBus(dialect, nc, scratch, { latencyTasks, throughputTasks, echoRefs: bareTasks[0]!.refs }, options);
    return {
      dialect,
      bare: latencyOf(bare),
      lease: latencyOf(lease),
      advisory: advisory && latencyOf(advisory),
      repoSend: latencyOf(repoSend),
      ...throughTheBus,
    };
  } finally {
    await drop();
  }
}

type BusFigures = Pick<Figures, 'rtt' | 'publish' | 'endpoint' | 'endpointConcurrentOpsPerSec'>;

/** The figures through the bus, with the worker running on `scratch`. */
async function measureThroughTheBus(
  dialect: DialectName,
  nc: NatsConnection,
  scratch: ScratchDatabase,
  tasks: { latencyTasks: SeededCommentedTask[]; throughputTasks: SeededCommentedTask[]; echoRefs: SeededCommentedTask['refs'] },
  options: Options,
): Promise<BusFigures> {
  // Random: deleteTopology also removes every stream whose name starts with the prefix's.
  const prefix = `benchsend${randomUUID().replaceAll('-', '').slice(0, 8)}_${dialect}.`;
  const topology = topologyFor(prefix);
  const removeTopology = onCleanup(() => deleteTopology(nc, topology));
  const worker = await startWorker({
    db: scratch.db,
    nc,
    logger: silentLogger(),
    config: {
      subjectPrefix: prefix,
      healthPort: 0,
      projectionBatchSize: 16,
      projectionTransactions: 2,
      maxEventBytes: 262_144,
      maxDeliver: 10,
      ackWaitMs: 30_000,
      streamMaxAgeMs: 3_600_000,
      reconcilePageSize: 500,
      bootReconcile: false,
      respondDeadlineMs: 30_000,
      admissionLockTimeoutMs: LOCK_TIMEOUT_MS,
      // No turn-start hook (the default): the target is the service's own cost.
      turnStartHookSubject: '',
    },
  });
  const stopWorker = onCleanup(() => worker.stop());
  try {
    // The seeded tasks exist before the worker: its start-up refill of the summary bucket is over before any figure.
    await worker.summaryBucketFilled();

    progress(`[${dialect}] bus round trips x ${options.sends}`);
    const echoSubject = `${prefix}bench.echo`;
    const echo = nc.subscribe(echoSubject, { callback: (_err, m) => { m.respond(m.data); } });
    const echoBody = JSON.stringify({ session_id: randomUUID(), caller_id: randomUUID(), content: TYPED, plan_comment_refs: tasks.echoRefs });
    const rtt = await timeEach(Array.from({ length: options.sends }), async () => {
      await nc.request(echoSubject, echoBody, { timeout: 5000 });
    });
    echo.unsubscribe();

    progress(`[${dialect}] task_plan.comments_updated publish x ${options.sends}`);
    const publisher = new NatsPlanCommentPublisher(nc, topology, systemClock);
    const publish = await timeEach(Array.from({ length: options.sends }, () => randomUUID()), (taskId) =>
      publisher.publishComments({ task_id: taskId, plan_id: randomUUID(), revision: 1, comments: [] }, `${taskId}:bench:1`),
    );

    const { latencyTasks, throughputTasks } = tasks;
    progress(`[${dialect}] message.send x ${latencyTasks.length} one at a time, then ${throughputTasks.length} at ${options.concurrency} in flight`);
    const client = createPendingProjectorClient(nc, { prefix });
    const endpoint = await timeEach(latencyTasks, (task) => sendOnce(client, task));
    const endpointConcurrentOpsPerSec = await sendsInFlight(client, throughputTasks, options.concurrency);
    return { rtt: latencyOf(rtt), publish: latencyOf(publish), endpoint: latencyOf(endpoint), endpointConcurrentOpsPerSec };
  } finally {
    await stopWorker();
    await removeTopology();
  }
}

const boundOf = (f: Figures) => TARGET_BARE_P99_FACTOR * f.bare.p99 + f.rtt.p99;
const pair = (l: Latency) => `${f2(l.p50)} / ${f2(l.p99)}`;

function formatReport(f: Figures, options: Options): string[] {
  const n = options.sends;
  const bound = boundOf(f);
  const rows: Row[] = [
    [`bare transaction x ${n}, one at a time, p50 / p99 (ms)`, pair(f.bare), '', `${int(f.bare.opsPerSec)} tx/s`],
    [`bus round trip x ${n}, p50 / p99 (ms)`, pair(f.rtt), '', 'request to an echo responder'],
    [`lease alone x ${n}, p50 / p99 (ms)`, pair(f.lease), '', f.dialect === 'postgres' ? 'permit + reserved connection + lock + unlock' : 'in-process mutex'],
    ...(f.advisory ? [[`advisory lock + unlock on one reserved connection x ${n}, p50 / p99 (ms)`, pair(f.advisory), '', '3 round trips'] as Row] : []),
    [`context: repository send (lease + acceptPrompt) x ${n}, p50 / p99 (ms)`, pair(f.repoSend), '', `${int(f.repoSend.opsPerSec)} sends/s`],
    [`context: comments_updated publish alone x ${n}, p50 / p99 (ms)`, pair(f.publish), '', 'JetStream publish + ack, as a send makes after COMMIT'],
  ];
  rows.push(
    [`message.send x ${n}, one at a time, p50 / p99 (ms)`, pair(f.endpoint), '', `${int(f.endpoint.opsPerSec)} sends/s`],
    [`send p99 / (${TARGET_BARE_P99_FACTOR} x bare p99 + rtt p99 = ${f2(bound)} ms)`, f2(f.endpoint.p99 / bound), '<= 1', verdict(f.endpoint.p99 <= bound)],
    [`context: message.send throughput, ${options.concurrency} in flight (sends/s)`, int(f.endpointConcurrentOpsPerSec), '', ''],
  );
  return ['', `== ${DIALECT_TITLE[f.dialect]} ==`, ...textTable(rows)];
}

function formatSummary(all: readonly Figures[]): string[] {
  const cells = (fn: (f: Figures) => string) => all.map(fn);
  const lat = (l: Latency) => `p50 ${f2(l.p50)}, p99 ${f2(l.p99)} ms`;
  const lines = [
    ['bare transaction (the same writes)', ...cells((f) => `${lat(f.bare)}; ${int(f.bare.opsPerSec)}/s`), ''],
    ['bus round trip', ...cells((f) => lat(f.rtt)), ''],
    ['lease alone', ...cells((f) => lat(f.lease)), ''],
    ['advisory lock + unlock, one reserved connection', ...cells((f) => (f.advisory ? lat(f.advisory) : 'n/a')), ''],
    ['repository send (lease + acceptPrompt)', ...cells((f) => `${lat(f.repoSend)}; ${int(f.repoSend.opsPerSec)}/s`), ''],
    ['`task_plan.comments_updated` publish alone', ...cells((f) => lat(f.publish)), ''],
    ['`message.send` with 5 comments through the bus', ...cells((f) => `${lat(f.endpoint)}; ${int(f.endpointConcurrentOpsPerSec)}/s in flight`), ''],
    [`send p99 ÷ (${TARGET_BARE_P99_FACTOR} × bare p99 + rtt p99)`, ...cells((f) => `${f2(f.endpoint.p99 / boundOf(f))} ${verdict(f.endpoint.p99 <= boundOf(f))}`), '≤ 1'],
  ];
  const met = all.map((f) => `${DIALECT_TITLE[f.dialect]} ${f.endpoint.p99 <= boundOf(f) ? 1 : 0} of 1`);
  return ['summary:', ...markdownTable(['npm run bench:send', ...all.map((f) => DIALECT_TITLE[f.dialect]), 'target'], lines), `targets met: ${met.join(', ')}`];
}

async function main(): Promise<void> {
  const started = performance.now();
  const options = parseOptions();
  const out = (lines: readonly string[]) => process.stdout.write(`${lines.join('\n')}\n`);
  out([
    `npm run bench:send: message.send with ${COMMENTS_PER_SEND} plan comments against the bare transaction of its writes and a bus round trip, and the admission lease alone, per dialect`,
    ...formatRunInfo(await collectRunInfo(options)),
    `options:  --dialect ${options.dialects.join('+')} --sends ${options.sends} --concurrency ${options.concurrency} --pool ${options.pool}`,
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

runBench('npm run bench:send', main);
