/**
 * `npm run bench:send`: message.send carrying 5 plan comments, through the bus and the real worker,
 * against the bare transaction of the same writes and one bus round trip measured in the same run,
 * plus the admission lease's cost alone; and the queue path, queue.enqueue until the dispatcher's
 * prompt reaches the agent, against the bare transactions of its steps. USAGE below says more.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/transport-node';
import type { PendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { SETTINGS } from '../src/config.js';
import { NatsPlanCommentPublisher } from '../src/events/planComments/natsPlanCommentPublisher.js';
import { systemClock } from '../src/timestamps.js';
import { createTaskAdmission } from '../src/repository/admission/taskAdmission.js';
import type { DialectName } from '../src/repository/dialect.js';
import { openPlanCommentStore, type PlanCommentStore } from '../src/repository/planComments/planCommentStore.js';
import { createPromptStore } from '../src/repository/prompts/promptStore.js';
import type { RepositoryContext } from '../src/repository/context.js';
import { createPromptReceiptStore } from '../src/repository/prompts/promptReceiptStore.js';
import { formatPlanCommentPrompt, PLAN_COMMENT_LIMITS, utf8Length } from '../src/turns/planCommentPrompt.js';
import { busRoundTrips } from './bus.js';
import {
  WrongAnswerError,
  expectFields,
  inFlight,
  latencyOf,
  onCleanup,
  progress,
  runBench,
  timeEach,
  type BenchServices,
  type DialectResult,
} from './harness.js';
import { openScratchDatabase, type ScratchDatabase } from './scratchDatabase.js';
import { seedCommentedTask, type SeededCommentedTask } from './seed/fixtures.js';
import { advisoryLockRoundTrips, bareAcceptance, discardReceipts, leaseAlone, repositorySend } from './sendParts.js';
import { QUEUE_EDIT_ENTRIES, bareRemoves, bareReorders, endpointRemoves, endpointReorders, seedWaitingQueue, type WaitingQueue } from './sendQueueEdits.js';
import { QUEUE_MAX_PER_SESSION, RESERVATION_TTL_MS, bareQueueSteps, enqueueUntilPrompt, type ExpectedPrompt } from './sendQueueParts.js';
import { MAX_PROMPT_SENDS, sendReport, type Figures, type QueueRow } from './sendReport.js';
import { quiesce, withSendWorker, type SendWorker } from './sendWorker.js';

const COMMENTS_PER_SEND = 5;
const LOCK_TIMEOUT_MS = 5_000;
const TYPED = 'Please address these before you go on.';

interface Options {
  sends: number;
  concurrency: number;
  pool: number;
}

const TASK_SETS = [
  'bare',
  'bareQueue',
  'repo',
  'sendLatency',
  'sendThroughput',
  'queueLatency',
  'queueThroughput',
  'queueLatencyAt1',
  'queueThroughputAt1',
] as const;

type TaskSets = Record<(typeof TASK_SETS)[number], SeededCommentedTask[]>;

/** `count` tasks per set, each with one IDLE session, a plan and 5 plan comments. */
async function seedTaskSets(ctx: RepositoryContext, store: PlanCommentStore, count: number): Promise<TaskSets> {
  const sets = {} as TaskSets;
  for (const set of TASK_SETS) {
    sets[set] = [];
    for (let i = 0; i < count; i++) sets[set].push(await seedCommentedTask(ctx, store, { comments: COMMENTS_PER_SEND, workspaceId: 'bench' }));
  }
  return sets;
}

/** The visible prompt a send of `task`'s comments with `typed` stores (the bare transaction writes text of this size). */
async function promptOf(store: PlanCommentStore, task: SeededCommentedTask, typed = TYPED): Promise<string> {
  const snapshot = await store.getSnapshot(task.taskId);
  if (!snapshot.ok) throw new WrongAnswerError(`snapshot of ${task.taskId}: ${JSON.stringify(snapshot)}`);
  return formatPlanCommentPrompt(
    snapshot.snapshot.comments.map((c) => ({ id: c.id, body: c.body, selected_text: c.selectedText, created_at: c.createdAt })),
    typed,
  );
}

/** A prompt at the maximum size: `task`'s comments and typed text (prose with quotes and line ends) that bring the expansion to exactly promptMaxBytes. */
async function maxPromptOf(store: PlanCommentStore, task: SeededCommentedTask): Promise<{ typed: string; prompt: string }> {
  const around = utf8Length(await promptOf(store, task, 'x')) - 1;
  const line = 'Rename "step 2" and keep the migration reversible; check both dialects.\n';
  const bytes = PLAN_COMMENT_LIMITS.promptMaxBytes - around;
  const typed = line.repeat(Math.floor(bytes / line.length)) + 'x'.repeat(bytes % line.length);
  const prompt = await promptOf(store, task, typed);
  if (utf8Length(prompt) !== PLAN_COMMENT_LIMITS.promptMaxBytes)
    throw new WrongAnswerError(`the maximum prompt of ${task.taskId} is ${utf8Length(prompt)} bytes`);
  return { typed, prompt };
}

/**
 * One message.send carrying `task`'s comments; anything but a fresh acceptance that consumed all
 * of them is a wrong answer. Returns the caller id (the receipt of the prompt the worker then delivers).
 */
async function sendOnce(client: PendingProjectorClient, task: SeededCommentedTask, typed = TYPED): Promise<string> {
  const callerId = randomUUID();
  const reply = await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: typed, plan_comment_refs: task.refs });
  const left = reply.ok ? reply.plan_comments?.comments.length : undefined;
  expectFields(
    `message.send on task ${task.taskId}`,
    { ...reply, comments_left: left },
    { ok: true, replayed: false, receipt_id: callerId, message_id: callerId, comments_left: 0 },
  );
  return callerId;
}

async function measure(dialect: DialectName, options: Options, services: BenchServices): Promise<DialectResult> {
  const nc = await services.nats();
  const scratch = await openScratchDatabase(dialect, { postgresUrl: services.postgresUrl, maxConnections: options.pool, schemaPrefix: 'bench_send_' });
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
    const throughBus = [tasks.sendLatency, tasks.sendThroughput, tasks.queueLatency, tasks.queueThroughput, tasks.queueLatencyAt1, tasks.queueThroughputAt1];
    for (const task of throughBus.flat()) contentOf.set(task.taskId, await promptOf(store, task));
    const maxPromptTasks: SeededCommentedTask[] = [];
    for (let i = 0; i < Math.min(options.sends, MAX_PROMPT_SENDS); i++)
      maxPromptTasks.push(await seedCommentedTask(scratch.ctx, store, { comments: COMMENTS_PER_SEND, workspaceId: 'bench' }));
    const maxPrompts = new Map<string, { typed: string; prompt: string }>();
    for (const task of maxPromptTasks) maxPrompts.set(task.taskId, await maxPromptOf(store, task));

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
    const repoSend = await timeEach(tasks.repo, (task) => repositorySend(admission, createPromptStore(scratch.ctx, store.schema), task, TYPED));

    progress(`[${dialect}] bare reorder and bare remove on a paused session of ${QUEUE_EDIT_ENTRIES} waiting entries x ${options.sends} each`);
    const schema = { ...store.schema, receiptTable };
    const bareQueue100 = await seedWaitingQueue(scratch.ctx, schema);
    const bareReorder = await bareReorders(scratch.ctx, receiptTable, bareQueue100, options.sends);
    const bareRemove = await bareRemoves(scratch.ctx, schema, bareQueue100, options.sends);

    // The bare queue steps settled theirs: only the direct receipts of bare and repo send, and the bare edits' queue, are left.
    const expected = tasks.bare.length + tasks.repo.length + QUEUE_EDIT_ENTRIES;
    const discarded = await discardReceipts(scratch.ctx, receiptTable);
    if (discarded !== expected) {
      throw new WrongAnswerError(
        `expected the ${expected} receipts of the bare transaction, the repository send and the bare edits' queue, found ${discarded}`,
      );
    }
    // Seeded now, after the discard, for the worker's queue.reorder and queue.remove; paused, so no dispatcher delivers from it.
    const queue100 = await seedWaitingQueue(scratch.ctx, schema);

    const throughTheBus = await measureThroughTheBus(dialect, nc, scratch, { tasks, contentOf, queue100, maxPromptTasks, maxPrompts }, options);
    return sendReport(options, {
      dialect,
      bare: latencyOf(bare),
      bareQueue: latencyOf(bareQueue),
      lease: latencyOf(lease),
      advisory: advisory && latencyOf(advisory),
      repoSend: latencyOf(repoSend),
      ...throughTheBus,
      queueEdits: { ...throughTheBus.queueEdits, bareReorder: latencyOf(bareReorder), bareRemove: latencyOf(bareRemove) },
    });
  } finally {
    await drop();
  }
}

type BusFigures = Pick<Figures, 'rtt' | 'publish' | 'endpoint' | 'endpointMaxPrompt' | 'endpointConcurrentOpsPerSec' | 'queueRows'> & {
  queueEdits: Pick<Figures['queueEdits'], 'reorder' | 'remove'>;
};

/** What the figures through the bus run on: the task sets, the prompts they must deliver, the paused 100-entry queue. */
interface BusInputs {
  tasks: TaskSets;
  contentOf: ReadonlyMap<string, string>;
  queue100: WaitingQueue;
  /** Tasks whose send carries a prompt of exactly PLAN_COMMENT_LIMITS.promptMaxBytes, with its typed text and expansion. */
  maxPromptTasks: SeededCommentedTask[];
  maxPrompts: ReadonlyMap<string, { typed: string; prompt: string }>;
}

/** The worker's settings the figures through the bus depend on (besides the dispatcher's capacity). */
const BUS_WORKER_CONFIG = {
  projectionTransactions: 2,
  admissionLockTimeoutMs: LOCK_TIMEOUT_MS,
  // No turn-start hook (the default): the target is the service's own cost.
  turnStartHookSubject: '',
  // The values the bare queue steps use.
  queueMaxPerSession: QUEUE_MAX_PER_SESSION,
  reservationTtlMs: RESERVATION_TTL_MS,
};

/**
 * The figures through the bus, each worker on a topology of its own: one at the dispatcher's
 * default capacity for the sends and the queue rows, one at capacity 1 for the queue rows again
 * (right after, so the two rows run on the same database as alike as possible), and last one at the
 * default for the edits of the 100-entry queue, whose 30,000 position updates would otherwise be
 * dead rows under the capacity-1 row on PostgreSQL.
 */
async function measureThroughTheBus(
  dialect: DialectName,
  nc: NatsConnection,
  scratch: ScratchDatabase,
  inputs: BusInputs,
  options: Options,
): Promise<BusFigures> {
  const { tasks, contentOf } = inputs;
  const workerOptions = { dialect, nc, scratch, config: BUS_WORKER_CONFIG };
  const atDefault = await withSendWorker({ ...workerOptions, capacity: DEFAULT_CAPACITY }, async (bus) => ({
    ...(await measureSends(dialect, bus, inputs, options)),
    queue: await measureQueueRows(dialect, bus, contentOf, DEFAULT_CAPACITY, [tasks.queueLatency, tasks.queueThroughput], options),
  }));
  const atOne = await withSendWorker({ ...workerOptions, capacity: 1 }, (bus) =>
    measureQueueRows(dialect, bus, contentOf, 1, [tasks.queueLatencyAt1, tasks.queueThroughputAt1], options),
  );
  const queueEdits = await withSendWorker({ ...workerOptions, capacity: DEFAULT_CAPACITY }, async (bus) => {
    progress(`[${dialect}] queue.reorder, then queue.remove, on a paused session of ${QUEUE_EDIT_ENTRIES} waiting entries x ${options.sends} each`);
    const reorder = latencyOf(await endpointReorders(bus, inputs.queue100, options.sends));
    const remove = latencyOf(await endpointRemoves(bus, inputs.queue100, options.sends));
    return { reorder, remove };
  });
  const { queue, ...sends } = atDefault;
  return { ...sends, queueRows: [queue, atOne], queueEdits };
}

/** The dispatcher's capacity of a worker that is not told one (PROMPT_DISPATCH_CONCURRENCY). */
const DEFAULT_CAPACITY = SETTINGS.promptDispatchConcurrency.default;

/** The figures of message.send through the bus: the round trip, the publish alone, the send one at a time and in flight. */
async function measureSends(
  dialect: DialectName,
  bus: SendWorker,
  { tasks, contentOf, maxPromptTasks, maxPrompts }: BusInputs,
  options: Options,
): Promise<Pick<BusFigures, 'rtt' | 'publish' | 'endpoint' | 'endpointMaxPrompt' | 'endpointConcurrentOpsPerSec'>> {
  const { nc, prefix, topology, client, agent } = bus;
  const contentFor = (task: SeededCommentedTask) => contentOf.get(task.taskId)!;
  progress(`[${dialect}] bus round trips x ${options.sends}`);
  const echoBody = JSON.stringify({ session_id: randomUUID(), caller_id: randomUUID(), content: TYPED, plan_comment_refs: tasks.bare[0]!.refs });
  const rtt = await busRoundTrips(nc, prefix, echoBody, options.sends);

  progress(`[${dialect}] task_plan.comments.changed publish x ${options.sends}`);
  const publisher = new NatsPlanCommentPublisher(nc, topology, systemClock);
  const publish = await timeEach(
    Array.from({ length: options.sends }, () => randomUUID()),
    (taskId) => publisher.publishComments({ task_id: taskId, plan_id: randomUUID(), revision: 1, comments: [] }, `${taskId}:bench:1`),
  );

  progress(`[${dialect}] message.send x ${tasks.sendLatency.length} one at a time, then ${tasks.sendThroughput.length} at ${options.concurrency} in flight`);
  const sent: ExpectedPrompt[] = [];
  const sendRecorded = async (task: SeededCommentedTask) => {
    sent.push({ receiptId: await sendOnce(client, task), task, deliveryKind: 'direct', content: contentFor(task) });
  };
  // One at a time means on an idle worker: each sample starts once the previous prompt was
  // delivered, settled and its events projected, so it measures the send, not the overlap with
  // its predecessor's delivery (the throughput below has all of that in flight at once).
  const endpoint = await timeEach(tasks.sendLatency, async (task) => {
    const t0 = performance.now();
    const receiptId = await sendOnce(client, task);
    const ms = performance.now() - t0;
    await agent.arrival({ receiptId, task, deliveryKind: 'direct', content: contentFor(task) });
    await quiesce(bus, receiptId);
    return ms;
  });
  progress(`[${dialect}] message.send at the maximum prompt size (${PLAN_COMMENT_LIMITS.promptMaxBytes} bytes) x ${maxPromptTasks.length} one at a time`);
  const endpointMaxPrompt = await timeEach(maxPromptTasks, async (task) => {
    const { typed, prompt } = maxPrompts.get(task.taskId)!;
    const t0 = performance.now();
    const receiptId = await sendOnce(client, task, typed);
    const ms = performance.now() - t0;
    await agent.arrival({ receiptId, task, deliveryKind: 'direct', content: prompt });
    await quiesce(bus, receiptId);
    return ms;
  });
  const endpointConcurrentOpsPerSec = await inFlight(tasks.sendThroughput, options.concurrency, sendRecorded);

  // The sends' deliveries run in the background; the queue's figures must not wait behind them.
  progress(`[${dialect}] waiting for the ${sent.length} sends' prompts at the agent`);
  await Promise.all(sent.map((expected) => agent.arrival(expected)));
  return {
    rtt: latencyOf(rtt),
    publish: latencyOf(publish),
    endpoint: latencyOf(endpoint),
    endpointMaxPrompt: latencyOf(endpointMaxPrompt),
    endpointConcurrentOpsPerSec,
  };
}

/** queue.enqueue until its prompt, one at a time on `latency`'s tasks, then `throughput`'s at --concurrency in flight. */
async function measureQueueRows(
  dialect: DialectName,
  bus: SendWorker,
  contentOf: ReadonlyMap<string, string>,
  capacity: number,
  [latency, throughput]: [SeededCommentedTask[], SeededCommentedTask[]],
  options: Options,
): Promise<QueueRow> {
  progress(
    `[${dialect}] dispatcher capacity ${capacity}: queue.enqueue until its prompt x ${latency.length} one at a time, then ${throughput.length} at ${options.concurrency} in flight`,
  );
  const enqueue = (task: SeededCommentedTask) => enqueueUntilPrompt(bus.client, bus.agent, task, TYPED, contentOf.get(task.taskId)!);
  const queue = await timeEach(latency, async (task) => {
    const sample = await enqueue(task);
    await quiesce(bus, sample.receiptId);
    return sample.ms;
  });
  const concurrentOpsPerSec = await inFlight(throughput, options.concurrency, enqueue);
  return { capacity, isDefault: capacity === DEFAULT_CAPACITY, queue: latencyOf(queue), concurrentOpsPerSec };
}

runBench<Options>({
  script: 'bench:send',
  title: `message.send and queue.enqueue with ${COMMENTS_PER_SEND} plan comments against the bare transactions of their writes and bus round trips, and the admission lease alone, per dialect`,
  options: {
    sends: { arg: '<n>', default: '300', help: 'tasks per measurement' },
    concurrency: { arg: '<n>', default: '8', help: 'requests in flight for the throughput' },
    pool: { arg: '<n>', default: '4', help: 'PostgreSQL pool size of the worker and the bench, at least 2' },
  },
  parse: (read) => ({ sends: read.int('sends', 1), concurrency: read.int('concurrency', 1), pool: read.int('pool', 2) }),
  measure,
});
