import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { errors, type NatsConnection } from '@nats-io/transport-node';
import pRetry from 'p-retry';
import pino, { type Logger } from 'pino';
import type { Config } from '../config.js';
import { NatsClarificationDelivery } from '../events/clarifications/natsClarificationDelivery.js';
import { NatsEventPublisher } from '../events/natsEventPublisher.js';
import { NatsSummaryPublisher } from '../events/natsSummaryPublisher.js';
import { ensureOutputTopology, ensureTopology, type ReplicaMismatch } from '../events/natsTopology.js';
import { topologyFor, type Topology } from '../contract/subjects.js';
import type { SummaryBucket } from '../events/summaryBucket.js';
import { createLogger, resolveLogFormat } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { projectionCapacity } from '../projectors/projectionCapacity.js';
import { Projector } from '../projectors/projector.js';
import { createProjectionStore, type ProjectionStore } from '../repository/projection/projectionStore.js';
import { createRepositoryContext, type RepositoryContext } from '../repository/context.js';
import type { Database } from '../repository/database.js';
import { nextPendingActionProjectionEpoch } from '../repository/projection/meta.js';
import { migrateSchema } from '../repository/migrate.js';
import { inspectRequiredIndexes, unservedIndexes } from '../repository/schema/indexInspection.js';
import { detectSchema, type SchemaModeSetting } from '../repository/schema/schemaMode.js';
import { createClarificationService, type ClarificationService } from '../services/clarifications/clarificationService.js';
import { createTaskService, type TaskService } from '../services/tasks/taskService.js';
import { createClarificationStore } from '../repository/clarifications/clarificationStore.js';
import { createTaskStore } from '../repository/tasks/taskStore.js';
import { detectTimestampForms, type TimestampFormOptions } from '../repository/timestampForms.js';
import { systemClock, type Clock } from '../timestamps.js';
import type { NatsClientSettings } from './natsConnectionOptions.js';
import { NatsPlanCommentPublisher } from '../events/planComments/natsPlanCommentPublisher.js';
import { NatsTurnStartHook } from '../events/prompts/natsTurnStartHook.js';
import { createTaskAdmission } from '../repository/admission/taskAdmission.js';
import { createPlanCommentStore, openPlanCommentStore } from '../repository/planComments/planCommentStore.js';
import { detectPlanCommentSchema, type PlanCommentSchema } from '../repository/schema/planCommentTables.js';
import { isPromptableSessionState } from '../turns/sessionStates.js';
import { createQueueLifecycle, type QueueLifecycle } from '../services/prompts/queueLifecycle.js';
import { createQueueStatusEvents, type QueueStatusEvents } from '../services/prompts/queueStatusEvents.js';
import { acceptanceRecorded } from '../repository/prompts/promptReplay.js';
import { getPrimarySession, getSession, getTask } from '../repository/tasks/tasks.js';
import { NO_PROMPT_DISPATCH, type PromptDispatch } from '../services/prompts/promptDispatch.js';
import type { Failpoints } from '../failpoints.js';
import { NatsPromptDelivery } from '../events/prompts/natsPromptDelivery.js';
import { createPromptReceiptStore, type PromptReceiptCount } from '../repository/prompts/promptReceiptStore.js';
import { createPromptDispatcher, type PromptDispatcher } from '../services/prompts/promptDispatcher.js';
import { reconcilePromptReceipts, type PromptReconcileReport } from '../services/prompts/reconcilePromptReceipts.js';
import type { TurnStartHook } from '../services/prompts/turnStartHook.js';
import type { AdmittedWrites } from '../services/admittedWrites.js';
import { createPlanCommentService, type PlanCommentService } from '../services/planComments/planCommentService.js';
import { createPlanCommentPublisher, type PlanCommentPublisher } from '../services/planComments/planCommentEvents.js';
import { createPromptService, type PromptService, type PromptTargets } from '../services/prompts/promptService.js';
import { createAttachmentService, type AttachmentService } from '../services/attachments/attachmentService.js';
import { createAttachmentStore } from '../repository/attachments/attachmentStore.js';
import { createPromptStore, type PromptStore } from '../repository/prompts/promptStore.js';
import { NO_TURN_START_HOOK } from '../services/prompts/turnStartHook.js';
import { ADD_INDEXES_COMMAND } from './addIndexesCommand.js';
import type { DatabaseConfig } from './connectDatabase.js';
import { probeDatabase } from './connectDatabase.js';
import { prepareConnections } from './prepareConnections.js';

/**
 * The parts every command that touches the bus shares, built here once: the database's stores
 * (after migrations), this process's projection epoch, the NATS topology, the summary publisher
 * and the projector. `worker`, `reconcile` and `replay` build them with `assembleParts`; `verify`
 * only reads, with `storesOf`.
 */

/** What the assembled parts read from the configuration. */
type PartsConfig = Pick<
  Config,
  'subjectPrefix' | 'projectionBatchSize' | 'projectionTransactions' | 'summaryBucketStorage' | 'streamReplicas' | 'schemaMode' | 'timestampForm'
>;

/** The inbound side's settings: only the worker creates or updates the events stream and its consumer. */
type InboundSettings = Pick<Config, 'streamMaxAgeMs' | 'maxDeliver' | 'ackWaitMs' | 'eventPartitions'>;

export interface PartsDeps {
  db: Database;
  nc: NatsConnection;
  config: PartsConfig;
  logger: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /**
   * Given (the worker): also the events stream, its durable consumer, the dead-letter and resume
   * streams. Omitted (one-shot commands beside running workers): only what publishing needs, so the
   * workers' stream settings and consumer stay as they are.
   */
  inbound?: InboundSettings;
}

export interface Parts {
  readonly db: Database;
  readonly nc: NatsConnection;
  readonly ctx: RepositoryContext;
  readonly clock: Clock;
  /** This process's epoch of per-session pending-action revisions (allocated from kandev_meta). */
  readonly epoch: string;
  readonly topology: Topology;
  readonly jsm: JetStreamManager;
  readonly summaries: SummaryBucket;
  readonly publisher: NatsSummaryPublisher;
  /** The projections' port onto the database (the projector, reconcile and the bucket refill). */
  readonly store: ProjectionStore;
  readonly projector: Projector;
}

/** How the stores over a database are built: the clock, the timestamp-form setting, a logger for what was detected. */
export interface StoresOptions extends TimestampFormOptions {
  clock?: Clock;
  logger?: Logger;
}

/**
 * The stores over `db`, as they are: no migration (a dry run writes nothing). The timestamp forms
 * of its Kandev-owned tables are detected here, once per database (`detectTimestampForms`), and
 * every statement and write of the returned context follows them.
 */
export async function storesOf(db: Database, options: StoresOptions = {}): Promise<RepositoryContext> {
  const clock = options.clock ?? systemClock;
  // verify opens the stores without migrating: it learns whose schema it is from the catalog.
  const kandevSchema = options.kandevSchema ?? (await detectSchema(db)).shape === 'kandev';
  const detection = await detectTimestampForms(createRepositoryContext(db, clock), { ...options, kandevSchema });
  options.logger?.info({ component: 'timestamps', ...detection.forms, sampled: detection.sampled }, `timestamps: ${detection.reason}`);
  return createRepositoryContext(db, clock, detection.forms);
}

/**
 * Applies the pending migrations of the schema mode `schemaMode` resolves to (a database it refuses
 * throws SchemaRefusedError), warns once per index the queries need that is not there (they still
 * work, slower; only `migrate --add-indexes` builds it), then the stores over `db`, whose timestamp
 * forms follow what the mode and the newest rows say.
 */
async function openStores(
  db: Database,
  logger: Logger,
  options: Omit<StoresOptions, 'logger' | 'kandevSchema'> & { schemaMode: SchemaModeSetting },
): Promise<RepositoryContext> {
  const log = logger.child({ component: 'migrate' });
  const { mode, applied } = await migrateSchema(db, options.schemaMode);
  if (applied.length > 0) log.info({ applied, schemaMode: mode }, 'applied migrations');
  const ctx = await storesOf(db, { clock: options.clock, setting: options.setting, logger, kandevSchema: mode === 'kandev' });
  // Inspected through the stores' dialect: which indexes serve the queries depends on its timestamp forms.
  for (const { index, state, found } of unservedIndexes(await inspectRequiredIndexes(ctx))) {
    log.warn(
      { index: index.name, table: index.table, state, found, schemaMode: mode },
      `index ${index.name} is ${state === 'different' ? 'held by a different index' : state}: the queries it serves run without it, slower; add it with ${ADD_INDEXES_COMMAND}`,
    );
  }
  return ctx;
}

/**
 * The one construction of a projector. Its capacity (tasks per transaction, transactions at once,
 * tasks in flight) is computed here, once, from the settings, the pool and the dialect.
 */
function createProjector(deps: {
  store: ProjectionStore;
  db: Database;
  publisher: NatsSummaryPublisher;
  config: PartsConfig;
  epoch: string;
  logger: Logger;
  metrics?: Metrics;
}): Projector {
  const capacity = projectionCapacity({
    batchSize: deps.config.projectionBatchSize,
    transactions: deps.config.projectionTransactions,
    connections: deps.db.maxConnections,
    singleWriter: deps.store.capabilities.singleWriter,
  });
  return new Projector({ store: deps.store, publisher: deps.publisher, logger: deps.logger, metrics: deps.metrics, capacity, epoch: deps.epoch });
}

/** The one construction of the clarification lifecycle the worker's endpoints serve. */
export function createClarifications(parts: Parts, deps: { nc: NatsConnection; respondDeadlineMs: number; logger: Logger }): ClarificationService {
  return createClarificationService({
    store: createClarificationStore(parts.ctx),
    delivery: new NatsClarificationDelivery(deps.nc, parts.topology, parts.clock),
    events: new NatsEventPublisher(deps.nc, parts.topology, parts.clock),
    refreshSummary: (taskId) => parts.projector.reproject(taskId),
    respondDeadlineMs: deps.respondDeadlineMs,
    logger: deps.logger,
  });
}

/** The one construction of the task endpoints' service (summary.get, task.reproject). */
export function createTasks(parts: Parts, logger: Logger): TaskService {
  return createTaskService({
    store: createTaskStore(parts.ctx),
    reproject: (taskId) => parts.projector.reproject(taskId),
    repair: (taskIds) => parts.projector.reprojectBatch(taskIds),
    logger,
  });
}

/** What the prompt, plan-comment and attachment services read of the configuration. */
export type PlanCommentsConfig = Pick<Config, 'admissionLockTimeoutMs' | 'turnStartHookSubject' | 'turnStartHookTimeoutMs' | 'queueMaxPerSession'>;

/** The turn-start hook of TURN_START_HOOK_SUBJECT (none when empty): admission's, and the dispatcher's for queued prompts. */
function createTurnStartHook(parts: Parts, nc: NatsConnection, config: PlanCommentsConfig): TurnStartHook {
  const subject = config.turnStartHookSubject;
  return subject ? new NatsTurnStartHook(nc, `${parts.topology.prefix}${subject}`, config.turnStartHookTimeoutMs) : NO_TURN_START_HOOK;
}

/** What the prompt dispatcher reads of the configuration. */
export type PromptDispatchConfig = PlanCommentsConfig & Pick<Config, 'reservationTtlMs' | 'promptDeadlineMs' | 'dispatchPollMs' | 'promptDispatchConcurrency'>;

export interface PromptDelivery {
  dispatcher: PromptDispatcher;
  reconcile(options?: { initial?: boolean }): Promise<{ report: PromptReconcileReport; sessions: string[] }>;
  /** Every receipt of the database by kind and step of delivery (the receipt gauge's read). */
  countReceipts(): Promise<PromptReceiptCount[] | undefined>;
}

/**
 * The one construction of the prompt dispatcher and its reconciliation over this database's
 * receipt table, delivering through the agent prompt stream. The owner name is unique per process,
 * so a reservation says which replica holds it.
 */
export async function createPromptDelivery(
  parts: Parts,
  deps: {
    nc: NatsConnection;
    config: PromptDispatchConfig;
    logger: Logger;
    failpoints: Failpoints;
    owner: string;
    metrics?: Metrics;
    /** A head that can never be delivered (promptDeliveryPass.ts): the worker settles its queue. */
    onUndeliverable?(sessionId: string): void;
  },
): Promise<PromptDelivery> {
  const store = createPromptReceiptStore(parts.ctx, (await openPlanCommentStore(parts.ctx)).schema);
  const delivery = new NatsPromptDelivery(deps.nc, parts.topology, parts.clock);
  const events = new NatsEventPublisher(deps.nc, parts.topology, parts.clock);
  const refreshSummary = (taskId: string) => parts.projector.reproject(taskId);
  const queueMax = deps.config.queueMaxPerSession;
  const dispatcher = createPromptDispatcher({
    store,
    delivery,
    events,
    refreshSummary,
    hook: createTurnStartHook(parts, deps.nc, deps.config),
    failpoints: deps.failpoints,
    logger: deps.logger,
    owner: deps.owner,
    reservationTtlMs: deps.config.reservationTtlMs,
    promptDeadlineMs: deps.config.promptDeadlineMs,
    queueMax,
    ineligibleRetryMs: deps.config.dispatchPollMs,
    maxConcurrentSessions: deps.config.promptDispatchConcurrency,
    metrics: deps.metrics,
    onUndeliverable: deps.onUndeliverable,
  });
  return {
    dispatcher,
    reconcile: (options) => reconcilePromptReceipts({ store, delivery, events, refreshSummary, logger: deps.logger, queueMax }, options),
    countReceipts: () => store.countByState(),
  };
}

/** The endpoints' services over this database's plan-comment, prompt and attachment tables. */
export interface PromptServices {
  endpoints: { planComments: PlanCommentService; prompts: PromptService; attachments: AttachmentService };
  /** The collection events both services issue; the worker waits for them on stop, after the endpoints. */
  commentEvents: PlanCommentPublisher;
  /** The queue status events the services issue after their replies; the worker waits for them on stop, after the endpoints. */
  queueStatus: QueueStatusEvents;
  /** Cancels the entries of queues whose session finished: on the events that say so, and on each reconciliation pass. */
  queueLifecycle: QueueLifecycle;
}

/** What a prompt may be sent to, read from the task and session rows. */
function promptTargets(ctx: RepositoryContext, schema: PlanCommentSchema): PromptTargets {
  return {
    async session(sessionId) {
      const session = await getSession(ctx, sessionId);
      return session ? { taskId: session.taskId, state: session.state, promptable: isPromptableSessionState(session.state) } : undefined;
    },
    async task(taskId) {
      const task = await getTask(ctx, taskId);
      if (!task) return undefined;
      const primary = await getPrimarySession(ctx, taskId);
      return {
        archived: task.archivedAt !== null,
        primary: primary ? { sessionId: primary.id, state: primary.state, promptable: isPromptableSessionState(primary.state) } : null,
      };
    },
    async archived(taskId) {
      const task = await getTask(ctx, taskId);
      return task ? task.archivedAt !== null : undefined;
    },
    callerIdUsed: (callerId) => acceptanceRecorded(ctx, schema, callerId),
  };
}

/**
 * The one construction of the plan-comment, prompt (message.send, Run, queue) and attachment
 * services: their stores over the database's tables, the task admission over the pool (refuses a
 * PostgreSQL pool under 2 connections), the turn-start hook of TURN_START_HOOK_SUBJECT (none when
 * empty), and the collection event publisher they share.
 */
export async function createPromptServices(
  parts: Parts,
  deps: { nc: NatsConnection; config: PlanCommentsConfig; logger: Logger; dispatch?: PromptDispatch; failpoints?: Failpoints },
): Promise<PromptServices> {
  const { ctx } = parts;
  const schema = await detectPlanCommentSchema(ctx);
  const comments = createPlanCommentStore(ctx, schema);
  const admission = createTaskAdmission(parts.db, {
    lockTimeoutMs: deps.config.admissionLockTimeoutMs,
    onWarning: (message) => deps.logger.warn({ component: 'admission' }, message),
  });
  const commentEvents = createPlanCommentPublisher(new NatsPlanCommentPublisher(deps.nc, parts.topology, parts.clock), deps.logger);
  // A store over the transaction of one admitted write: the services never see that transaction.
  const admitted = <S>(storeIn: (tx: RepositoryContext) => S): AdmittedWrites<S> => ({
    mutate: (taskId, fn) => admission.withMutation(ctx, taskId, (tx) => fn(storeIn(tx))),
  });
  const planComments = createPlanCommentService({
    store: comments,
    writes: admitted((tx) => createPlanCommentStore(tx, schema)),
    comments: commentEvents,
  });
  const promptStore = createPromptStore(ctx, schema);
  const promptWrites = admitted((tx) => createPromptStore(tx, schema));
  const queueStatus = queueStatusEventsOver(parts, promptStore, deps);
  const prompts = createPromptService({
    prompts: promptStore,
    promptWrites,
    comments,
    commentEvents,
    admission,
    hook: createTurnStartHook(parts, deps.nc, deps.config),
    targets: promptTargets(ctx, schema),
    queueStatus,
    queueMaxPerSession: deps.config.queueMaxPerSession,
    // The worker's dispatcher; without one (one-shot commands, tests of admission alone) receipts wait for a worker.
    dispatch: deps.dispatch ?? NO_PROMPT_DISPATCH,
    failpoints: deps.failpoints,
    logger: deps.logger,
  });
  const attachments = createAttachmentService({ store: createAttachmentStore(ctx, schema) });
  const queueLifecycle = queueLifecycleOver({ promptStore, promptWrites, queueStatus, commentEvents, ...deps });
  return { endpoints: { planComments, prompts, attachments }, commentEvents, queueStatus, queueLifecycle };
}

/** What cancelling finished queues reads of the configuration. */
export type QueueLifecycleConfig = Pick<Config, 'admissionLockTimeoutMs' | 'queueMaxPerSession'>;

/**
 * The queue lifecycle alone, for `reconcile`: its own admission over the pool and its own
 * collection publisher, whose events `settled()` waits for before the connection drains.
 */
export async function createQueueLifecycleOf(
  parts: Parts,
  deps: { nc: NatsConnection; config: QueueLifecycleConfig; logger: Logger },
): Promise<{ lifecycle: QueueLifecycle; settled(): Promise<void> }> {
  const { ctx } = parts;
  const schema = await detectPlanCommentSchema(ctx);
  const admission = createTaskAdmission(parts.db, {
    lockTimeoutMs: deps.config.admissionLockTimeoutMs,
    onWarning: (message) => deps.logger.warn({ component: 'admission' }, message),
  });
  const commentEvents = createPlanCommentPublisher(new NatsPlanCommentPublisher(deps.nc, parts.topology, parts.clock), deps.logger);
  const promptStore = createPromptStore(ctx, schema);
  const queueStatus = queueStatusEventsOver(parts, promptStore, deps);
  const lifecycle = queueLifecycleOver({
    promptStore,
    promptWrites: { mutate: (taskId, fn) => admission.withMutation(ctx, taskId, (tx) => fn(createPromptStore(tx, schema))) },
    queueStatus,
    commentEvents,
    ...deps,
  });
  return { lifecycle, settled: async () => void (await Promise.all([commentEvents.settled(), queueStatus.settled()])) };
}

/** `message.queue.status_changed` after each change, read from `store`, published on the bus (the summary refreshed when it refuses). */
function queueStatusEventsOver(parts: Parts, store: PromptStore, deps: { nc: NatsConnection; config: Pick<Config, 'queueMaxPerSession'>; logger: Logger }) {
  return createQueueStatusEvents({
    ports: { events: new NatsEventPublisher(deps.nc, parts.topology, parts.clock), refreshSummary: (taskId) => parts.projector.reproject(taskId) },
    read: (sessionId) => store.queueStatus(sessionId),
    queueMax: deps.config.queueMaxPerSession,
    logger: deps.logger,
  });
}

function queueLifecycleOver(deps: {
  promptStore: PromptStore;
  promptWrites: AdmittedWrites<PromptStore>;
  queueStatus: QueueStatusEvents;
  commentEvents: PlanCommentPublisher;
  logger: Logger;
}): QueueLifecycle {
  return createQueueLifecycle({
    prompts: deps.promptStore,
    promptWrites: deps.promptWrites,
    queueStatus: deps.queueStatus,
    publishComments: (plan) => deps.commentEvents.publish(plan),
    logger: deps.logger,
  });
}

/** Migrations, stores, epoch, topology, publisher and projector, in that order. */
export async function assembleParts(deps: PartsDeps): Promise<Parts> {
  const { db, nc, config, logger } = deps;
  const clock = deps.clock ?? systemClock;
  const ctx = await openStores(db, logger, { clock, setting: config.timestampForm, schemaMode: config.schemaMode });
  const epoch = await nextPendingActionProjectionEpoch(ctx);
  const topology = topologyFor(config.subjectPrefix);
  const created = { bucketStorage: config.summaryBucketStorage, replicas: config.streamReplicas };
  // Creating a replicated stream waits for its peers to elect a leader: on a busy cluster one
  // JetStream API call can time out where the next succeeds. The topology is idempotent (replicas
  // race here anyway), so a timed-out attempt is made again, twice, before the start fails.
  const { jsm, summaries, replicaMismatches } = await pRetry(
    async () =>
      deps.inbound
        ? await ensureTopology(nc, { topology, ...deps.inbound, ...created })
        : { ...(await ensureOutputTopology(nc, topology, created)), jsm: await jetstreamManager(nc) },
    {
      retries: 2,
      minTimeout: 1000,
      shouldRetry: ({ error }) => error instanceof errors.TimeoutError,
      onFailedAttempt: ({ error, retriesLeft }) => {
        if (retriesLeft > 0) logger.warn({ component: 'topology', err: error }, 'a JetStream call timed out while ensuring the streams; trying again');
      },
    },
  );
  warnOfReplicaMismatches(replicaMismatches, logger);
  const publisher = new NatsSummaryPublisher(nc, topology, summaries, clock);
  const store = createProjectionStore(ctx);
  const projector = createProjector({ store, db, publisher, config, epoch, logger, metrics: deps.metrics });
  return { db, nc, ctx, clock, epoch, topology, jsm, summaries, publisher, store, projector };
}

/**
 * An existing stream keeps its replica count (ensureTopology never rescales one): each that differs
 * from STREAM_REPLICAS is one warning naming the change that would rescale it, which the operator
 * runs when the cluster has room for the copies.
 */
function warnOfReplicaMismatches(mismatches: readonly ReplicaMismatch[], logger: Logger): void {
  const log = logger.child({ component: 'topology' });
  for (const { stream, replicas, wanted } of mismatches) {
    log.warn(
      { stream, replicas, wanted },
      `stream ${stream} has ${replicas} replica(s), STREAM_REPLICAS asks for ${wanted}: left as it is. ` +
        `To change it, run \`nats stream edit ${stream} --replicas ${wanted}\` (a stream update of num_replicas), ` +
        `or set STREAM_REPLICAS=${replicas} to silence this`,
    );
  }
}

/** What a one-shot command that publishes projections reads. */
export type CommandConfig = PartsConfig & DatabaseConfig & NatsClientSettings & Pick<Config, 'logLevel' | 'logFormat'>;

/**
 * Runs a one-shot command (reconcile, replay) over its own database pool and NATS connection named
 * `connectionName`, beside any running workers; drains and closes both afterwards. Every setting is
 * checked before either connection is made, and each connection fails with one line naming its
 * setting (ConnectionFailedError). Logs go to stderr: stdout is the command's report.
 */
export async function withCommandParts<T>(config: CommandConfig, connectionName: string, run: (parts: Parts, logger: Logger) => Promise<T>): Promise<T> {
  const logger = createLogger(config.logLevel, { destination: pino.destination(2), format: resolveLogFormat(config.logFormat) });
  const { db, nats } = prepareConnections(config, logger);
  try {
    await probeDatabase(db, config.databaseUrl);
    const nc = await nats.connect(connectionName);
    try {
      return await run(await assembleParts({ db, nc, config, logger }), logger);
    } finally {
      await nc.drain().catch(() => undefined);
    }
  } finally {
    await db.destroy();
  }
}
