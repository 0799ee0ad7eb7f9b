/**
 * `npm run bench:send`: message.send carrying 5 plan comments, through the bus and the real worker,
 * against the bare transaction of the same writes and one bus round trip measured in the same run,
 * plus the admission lease's cost alone; and the queue path, queue.enqueue until the dispatcher's
 * prompt reaches the agent, against the bare transactions of its steps. USAGE below says more.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { startWorker, type WorkerHandle } from '../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { NatsPlanCommentPublisher } from '../src/events/natsPlanCommentPublisher.js';
import { topologyFor } from '../src/contract/subjects.js';
import { silentLogger } from '../src/logger.js';
import { systemClock } from '../src/timestamps.js';
import { createTaskAdmission } from '../src/repository/admission/taskAdmission.js';
import type { DialectName } from '../src/repository/dialect.js';
import { openPlanCommentStore, type PlanCommentStore } from '../src/repository/planCommentStore.js';
import { rawRows, type RepositoryContext } from '../src/repository/context.js';
import { createPromptReceiptStore } from '../src/repository/promptReceiptStore.js';
import { formatPlanCommentPrompt } from '../src/turns/planCommentPrompt.js';
import { WrongAnswerError, onCleanup, parseCommandLine, progress, runBench, secs } from './benchRun.js';
import { optionChecks } from './optionChecks.js';
import { collectRunInfo, formatRunInfo } from './runInfo.js';
import { openScratchDatabase, type ScratchDatabase } from './scratchDatabase.js';
import { seedCommentedTask, type SeededCommentedTask } from './seed/fixtures.js';
import { advisoryLockRoundTrips, bareAcceptance, discardReceipts, inFlight, leaseAlone, repositorySend, timeEach } from './sendParts.js';
import { QUEUE_MAX_PER_SESSION, RESERVATION_TTL_MS, bareQueueSteps, enqueueUntilPrompt, startPromptAgent, timeReported, type ExpectedPrompt } from './sendQueueParts.js';
import { formatReport, formatSummary, latencyOf, type Figures } from './sendReport.js';
import { deleteTopology } from './workerNats.js';

const USAGE = `
npm run bench:send -- [--dialect sqlite|postgres|both] [--sends <n>] [--concurrency <n>] [--pool <n>]

Measures, per dialect, on --sends tasks each (one IDLE session, a plan, 5 plan comments):
  bare       the writes of an accepted send in one transaction, one at a time: the 5 comment rows
             deleted at their versions, comments_revision bumped, the turn, the prompt sequence
             number, the user message, the receipt row (no reads, no locks, no checks)
  bare queue the queue path's transactions for one prompt, timed as one, one prompt at a time, no
             bus and no dispatcher: enqueue's accepting transaction (the admission mutation around
             acceptPrompt, queued, 5 comments), then through a prompt receipt store reserveHead,
             persistTranscript, markAttempted and settle (acknowledged); not the dispatcher's reads
             around them (eligibility, waiting counts) nor its events
  rtt        one bus round trip: a request to an echo responder on the same server
  lease      the admission lease alone, around nothing (task + caller-id keys); PostgreSQL also:
             the advisory lock + unlock of those keys on one reserved connection
  repo send  context: the lease around acceptPrompt, no bus
  publish    context: the task_plan.comments_updated JetStream publish a send issues after COMMIT,
             alone (on a random task id, into this run's own output stream); the reply does not
             wait for its acknowledgement
  send       message.send with 5 plan_comment_refs through the bus and the worker, one at a time
             (until its reply); its throughput at --concurrency requests in flight (each on its own task)
  queue      queue.enqueue with 5 plan_comment_refs through the bus and the worker, from the request
             until the worker's dispatcher delivered its prompt to the "agent" (a core subscription
             on <prefix>agent.*.prompt, matched by receipt id), one at a time, each on a fresh IDLE
             session (a delivery leaves it RUNNING); its throughput (prompts delivered per second)
             at --concurrency in flight
Targets: send p99 <= 3 x bare p99 + rtt p99; queue p99 <= 3 x bare queue p99 + 2 x rtt p99 (the
request and the prompt's publish). No turn-start hook is configured.

The figures without the bus (bare, bare queue, lease, repo send) are taken before the worker
starts, so no prompt dispatcher exists while they run: none can race the bare queue steps for a
session's head between the accept and reserveHead (its poll would find the new receipt due), and
none delivers the direct receipts bare and repo send leave (those are deleted before it starts).
The worker's dispatcher delivers every accepted message.send too: the bench checks that each
send's prompt reaches the agent exactly once, and waits for all of them before timing the queue.
Every reply and every prompt is checked; a wrong one stops the run.

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

interface TaskSets {
  bare: SeededCommentedTask[];
  bareQueue: SeededCommentedTask[];
  repo: SeededCommentedTask[];
  sendLatency: SeededCommentedTask[];
  sendThroughput: SeededCommentedTask[];
  queueLatency: SeededCommentedTask[];
  queueThroughput: SeededCommentedTask[];
}

const TASK_SETS = ['bare', 'bareQueue', 'repo', 'sendLatency', 'sendThroughput', 'queueLatency', 'queueThroughput'] as const;

/** `count` tasks per set, each with one IDLE session, a plan and 5 plan comments. */
async function seedTaskSets(ctx: RepositoryContext, store: PlanCommentStore, count: number): Promise<TaskSets> {
  const sets = {} as TaskSets;
  for (const set of TASK_SETS) {
    sets[set] = [];
    for (let i = 0; i < count; i++) sets[set].push(await seedCommentedTask(ctx, store, { comments: COMMENTS_PER_SEND, workspaceId: 'bench' }));
  }
  return sets;
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

/**
 * One message.send carrying `task`'s comments; anything but a fresh acceptance that consumed all
 * of them is a wrong answer. Returns the caller id (the receipt of the prompt the worker then delivers).
 */
async function sendOnce(client: PendingProjectorClient, task: SeededCommentedTask): Promise<string> {
  const callerId = randomUUID();
  const reply = await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: TYPED, plan_comment_refs: task.refs });
  if (!reply.ok || reply.replayed || reply.receipt_id !== callerId || reply.message_id !== callerId || reply.plan_comments?.comments.length !== 0) {
    throw new WrongAnswerError(`message.send on task ${task.taskId}: ${JSON.stringify(reply)}`);
  }
  return callerId;
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

    progress(`[${dialect}] seeding ${options.sends * TASK_SETS.length} tasks with ${COMMENTS_PER_SEND} plan comments each into ${scratch.where}`);
    const tasks = await seedTaskSets(scratch.ctx, store, options.sends);
    const prompt = await promptOf(store, tasks.bare[0]!);
    // What the prompts delivered through the bus must carry, read before their comments are consumed.
    const contentOf = new Map<string, string>();
    for (const task of [...tasks.sendLatency, ...tasks.sendThroughput, ...tasks.queueLatency, ...tasks.queueThroughput]) contentOf.set(task.taskId, await promptOf(store, task));

    // Everything without the bus comes first, while no worker (so no prompt dispatcher) exists:
    // one could take the bare queue steps' receipts before they reserve them, and it would deliver
    // the direct receipts of bare and repo send in the background, during the later figures.
    progress(`[${dialect}] bare transaction x ${tasks.bare.length}`);
    const bare = await timeEach(tasks.bare, (task) => bareAcceptance(scratch.ctx, receiptTable, task, prompt));

    progress(`[${dialect}] bare queue steps (accept, reserve, transcript, marker, settle) x ${tasks.bareQueue.length}`);
    const receipts = createPromptReceiptStore(scratch.ctx, store.schema);
    const bareQueue = await timeEach(tasks.bareQueue, (task) => bareQueueSteps({ ctx: scratch.ctx, schema: store.schema, admission, receipts }, task, TYPED));

    progress(`[${dialect}] lease alone x ${options.sends}${dialect === 'postgres' ? ', advisory lock + unlock x the same' : ''}`);
    const lease = await leaseAlone(admission, options.sends);
    const advisory = dialect === 'postgres' ? await advisoryLockRoundTrips(scratch.db, options.sends) : undefined;

    progress(`[${dialect}] repository send (lease + acceptPrompt) x ${tasks.repo.length}`);
    const repoSend = await timeEach(tasks.repo, (task) => repositorySend(admission, store, task, TYPED));

    // The bare queue steps settled theirs: only the direct receipts of bare and repo send are left.
    const discarded = await discardReceipts(scratch.ctx, receiptTable);
    if (discarded !== tasks.bare.length + tasks.repo.length) {
      throw new WrongAnswerError(`expected the ${tasks.bare.length + tasks.repo.length} direct receipts of the bare transaction and the repository send, found ${discarded}`);
    }

    const throughTheBus = await measureThroughTheBus(dialect, nc, scratch, tasks, contentOf, options);
    return {
      dialect,
      bare: latencyOf(bare),
      bareQueue: latencyOf(bareQueue),
      lease: latencyOf(lease),
      advisory: advisory && latencyOf(advisory),
      repoSend: latencyOf(repoSend),
      ...throughTheBus,
    };
  } finally {
    await drop();
  }
}

type BusFigures = Pick<Figures, 'rtt' | 'publish' | 'endpoint' | 'endpointConcurrentOpsPerSec' | 'queue' | 'queueConcurrentOpsPerSec'>;

/** The figures through the bus, with the worker running on `scratch`. */
async function measureThroughTheBus(
  dialect: DialectName,
  nc: NatsConnection,
  scratch: ScratchDatabase,
  tasks: TaskSets,
  contentOf: ReadonlyMap<string, string>,
  options: Options,
): Promise<BusFigures> {
  // Random: deleteTopology also removes every stream whose name starts with the prefix's.
  const prefix = `benchsend${randomUUID().replaceAll('-', '').slice(0, 8)}_${dialect}.`;
  const topology = topologyFor(prefix);
  const removeTopology = onCleanup(() => deleteTopology(nc, topology));
  const receiptTable = (await openPlanCommentStore(scratch.ctx)).schema.receiptTable ?? 'queued_messages';
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
      // The values the bare queue steps use.
      queueMaxPerSession: QUEUE_MAX_PER_SESSION,
      reservationTtlMs: RESERVATION_TTL_MS,
    },
  });
  const jsm = await jetstreamManager(nc);
  const stopWorker = onCleanup(() => worker.stop());
  try {
    // The seeded tasks exist before the worker: its start-up refill of the summary bucket is over before any figure.
    await worker.summaryBucketFilled();
    const contentFor = (task: SeededCommentedTask) => contentOf.get(task.taskId)!;

    progress(`[${dialect}] bus round trips x ${options.sends}`);
    const echoSubject = `${prefix}bench.echo`;
    const echo = nc.subscribe(echoSubject, { callback: (_err, m) => { m.respond(m.data); } });
    const echoBody = JSON.stringify({ session_id: randomUUID(), caller_id: randomUUID(), content: TYPED, plan_comment_refs: tasks.bare[0]!.refs });
    const rtt = await timeEach(Array.from({ length: options.sends }), async () => {
      await nc.request(echoSubject, echoBody, { timeout: 5000 });
    });
    echo.unsubscribe();

    progress(`[${dialect}] task_plan.comments_updated publish x ${options.sends}`);
    const publisher = new NatsPlanCommentPublisher(nc, topology, systemClock);
    const publish = await timeEach(Array.from({ length: options.sends }, () => randomUUID()), (taskId) =>
      publisher.publishComments({ task_id: taskId, plan_id: randomUUID(), revision: 1, comments: [] }, `${taskId}:bench:1`),
    );

    const agent = startPromptAgent(nc, topology);
    const client = createPendingProjectorClient(nc, { prefix });
    progress(`[${dialect}] message.send x ${tasks.sendLatency.length} one at a time, then ${tasks.sendThroughput.length} at ${options.concurrency} in flight`);
    const sent: ExpectedPrompt[] = [];
    const sendRecorded = async (task: SeededCommentedTask) => {
      sent.push({ receiptId: await sendOnce(client, task), task, deliveryKind: 'direct', content: contentFor(task) });
    };
    // One at a time means on an idle worker: each sample starts once the previous prompt was
    // delivered, settled and its events projected, so it measures the send, not the overlap with
    // its predecessor's delivery (the throughput below has all of that in flight at once).
    const endpoint = await timeReported(tasks.sendLatency, async (task) => {
      const t0 = performance.now();
      const receiptId = await sendOnce(client, task);
      const ms = performance.now() - t0;
      await agent.arrival({ receiptId, task, deliveryKind: 'direct', content: contentFor(task) });
      await quiesce(scratch.ctx, receiptTable, worker, jsm, receiptId);
      return ms;
    });
    const endpointConcurrentOpsPerSec = await inFlight(tasks.sendThroughput, options.concurrency, sendRecorded);

    // The sends' deliveries run in the background; the queue's figures must not wait behind them.
    progress(`[${dialect}] waiting for the ${sent.length} sends' prompts at the agent`);
    await Promise.all(sent.map((expected) => agent.arrival(expected)));

    progress(`[${dialect}] queue.enqueue until its prompt x ${tasks.queueLatency.length} one at a time, then ${tasks.queueThroughput.length} at ${options.concurrency} in flight`);
    const enqueue = (task: SeededCommentedTask) => enqueueUntilPrompt(client, agent, task, TYPED, contentFor(task));
    const queue = await timeReported(tasks.queueLatency, async (task) => {
      const sample = await enqueue(task);
      await quiesce(scratch.ctx, receiptTable, worker, jsm, sample.receiptId);
      return sample.ms;
    });
    const queueConcurrentOpsPerSec = await inFlight(tasks.queueThroughput, options.concurrency, enqueue);
    agent.stop();
    return { rtt: latencyOf(rtt), publish: latencyOf(publish), endpoint: latencyOf(endpoint), endpointConcurrentOpsPerSec, queue: latencyOf(queue), queueConcurrentOpsPerSec };
  } finally {
    await stopWorker();
    await removeTopology();
  }
}

/**
 * Until the receipt was settled, its pass's events are in the events stream, the worker's consumer
 * has settled every event, and the projections they asked for are done: an idle worker.
 */
async function quiesce(ctx: RepositoryContext, receiptTable: string, worker: WorkerHandle, jsm: JetStreamManager, receiptId: string): Promise<void> {
  while ((await rawRows(ctx, `SELECT 1 FROM ${receiptTable} WHERE id = ?`, [receiptId])).length > 0) await sleep(1);
  await worker.promptsIdle();
  for (;;) {
    const info = await jsm.consumers.info(worker.topology.eventsStream, worker.topology.consumer);
    if (info.num_pending === 0 && info.num_ack_pending === 0) break;
    await sleep(1);
  }
  await worker.projector.whenIdle();
}

async function main(): Promise<void> {
  const started = performance.now();
  const options = parseOptions();
  const out = (lines: readonly string[]) => process.stdout.write(`${lines.join('\n')}\n`);
  out([
    `npm run bench:send: message.send and queue.enqueue with ${COMMENTS_PER_SEND} plan comments against the bare transactions of their writes and bus round trips, and the admission lease alone, per dialect`,
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
