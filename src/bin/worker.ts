import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { EventDelivery } from '../events/natsEventConsumer.js';
import { eventConsumers } from '../events/natsTopology.js';
import { topologyFor, type Topology } from '../contract/subjects.js';
import { checkNatsMaxPayload } from '../events/natsMaxPayload.js';
import { NatsPermissionError, probeNatsPermissions } from '../events/natsPermissions.js';
import { createMetrics, type Metrics } from '../metrics.js';
import { bootReconcile, type BootReconcileOutcome, type Lease } from '../projectors/bootReconcile.js';
import type { Projector } from '../projectors/projector.js';
import type { RepositoryContext } from '../repository/context.js';
import type { Database } from '../repository/database.js';
import { acquireLease, releaseLease } from '../repository/projection/leases.js';
import { countStatusSummaries } from '../repository/projection/statusSummaries.js';
import type { ClarificationService } from '../services/clarifications/clarificationService.js';
import { toCanonicalTimestamp, type Clock } from '../timestamps.js';
import { NO_FAILPOINTS, type Failpoints } from '../failpoints.js';
import { queueScopeToSettle, sessionToWake } from '../services/prompts/promptDispatchRules.js';
import type { EventData } from '../contract/envelope.js';
import { assembleParts, createClarifications, createPromptServices, createPromptDelivery, createTasks } from './assembly.js';
import { startComponents, type WorkerComponent } from './worker/component.js';
import { consumerLagProbe } from './worker/consumerLagProbe.js';
import { deliveryRecoveryLoop } from './worker/deliveryRecoveryLoop.js';
import { eventConsumptionComponent } from './worker/eventConsumption.js';
import { healthServerComponent } from './worker/healthServer.js';
import { holdSqliteWorkerLock } from './worker/holdSqliteWorkerLock.js';
import { promptDispatcherComponent } from './worker/promptDispatcherComponent.js';
import { replicaStatsSource } from './worker/replicaStats.js';
import { serviceEndpointsComponent } from './worker/serviceEndpointsComponent.js';
import { natsOperationsBus } from '../events/natsOperations.js';
import { findDrift, toDriftPayload } from '../projectors/reconcile.js';
import { createOperationsService } from '../services/operations/operationsService.js';
import { summaryBucketRefillerComponent } from './worker/summaryBucketRefiller.js';
import { workerPermissionNeeds } from './worker/workerPermissionNeeds.js';
import { redactCredentials } from '../redaction.js';
import { resolveWorkerConfig, type StartWorkerSettings, type WorkerConfig } from './workerSettings.js';

export type { WorkerConfig };

export interface WorkerDeps {
  db: Database;
  nc: NatsConnection;
  config: WorkerConfig;
  logger: Logger;
  clock?: Clock;
  /** Boundaries where a crash test stops the worker (test/support/failpointWorker.ts); none when absent, and no setting arms one. */
  failpoints?: Failpoints;
  /** Rearranges or extends the component list before it starts (tests of the lifecycle itself). */
  arrangeComponents?: (components: readonly WorkerComponent[]) => readonly WorkerComponent[];
}

export interface WorkerHandle {
  readonly topology: Topology;
  readonly projector: Projector;
  /** Resolves once this replica's prompt dispatcher has no pass running or scheduled (benchmarks wait on it between samples). */
  promptsIdle(): Promise<void>;
  readonly metrics: Metrics;
  readonly healthPort: number;
  readonly ctx: RepositoryContext;
  /** The clarification lifecycle the endpoints serve (benchmarks call it directly). */
  readonly clarifications: ClarificationService;
  /** Resolves when the boot reconcile ended (or was skipped or handed to another replica); never rejects. */
  readonly bootReconcile: Promise<BootReconcileOutcome>;
  /** Resolves once the summary bucket was checked against the database and no refill of it runs. */
  summaryBucketFilled(): Promise<void>;
  /** Stops the components in reverse order of start: pulling first, the health server last. Idempotent. */
  stop(): Promise<void>;
}

const BOOT_LEASE = 'boot_reconcile';
const LEASE_TTL_MS = 60_000;
// Older claims than the respond deadline plus this are no longer in delivery on any replica.
const RECOVERY_MARGIN_MS = 5000;
// Lag with no event settled for this long means the consumer is stuck, not busy.
const STUCK_AFTER_MS = 60_000;
// A scrape reads the prompt receipt counts from the database at most this often: a scraper (or
// several) polling fast costs one small COUNT per interval, and nothing is read between scrapes.
const PROMPT_RECEIPTS_MAX_AGE_MS = 5_000;

function bootLease(ctx: RepositoryContext): Lease {
  const owner = randomUUID();
  return {
    acquire: () => acquireLease(ctx, BOOT_LEASE, owner, LEASE_TTL_MS),
    release: () => releaseLease(ctx, BOOT_LEASE, owner),
  };
}

/**
 * Checks the server's max_payload against the worker's limits (NatsMaxPayloadError), the NATS
 * user's permissions (NatsPermissionError names each one missing), takes a SQLite
 * file's worker lock (SqliteWorkerLockedError when another worker serves the file), then assembles
 * one worker and starts its components in order; a component that fails to start stops
 * the ones before it. Live events flow while the boot reconcile runs (under a lease: one replica at
 * a time) and coalesce with it.
 */
export async function startWorker(given: WorkerDeps): Promise<WorkerHandle> {
  const deps = { ...given, config: resolveWorkerConfig(given.config) };
  const { nc, config } = deps;
  // First of all: a server whose max_payload cannot carry the largest prompt, collection or queue is told now, not at its first use.
  checkNatsMaxPayload(nc, config);
  // Before anything is migrated or created: a user lacking a permission is told which, now.
  const denials = await probeNatsPermissions(nc, workerPermissionNeeds(topologyFor(config.subjectPrefix), config.natsInboxPrefix, config.eventPartitions));
  if (denials.length > 0) throw new NatsPermissionError(denials);
  // Before the migration too: a second worker on a SQLite file is refused before it writes anything.
  const releaseLock = await holdSqliteWorkerLock(deps.db);
  try {
    return await startHoldingLock(deps, releaseLock);
  } catch (err) {
    releaseLock();
    throw err;
  }
}

async function startHoldingLock(deps: WorkerDeps & { config: StartWorkerSettings }, releaseLock: () => void): Promise<WorkerHandle> {
  const { nc, config, logger } = deps;
  const metrics = createMetrics();
  const startedAt = toCanonicalTimestamp(new Date());
  const replica = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const parts = await assembleParts({ db: deps.db, nc, config, logger, clock: deps.clock, metrics, inbound: config });
  const { ctx, projector, topology, epoch } = parts;
  const clarifications = createClarifications(parts, { nc, respondDeadlineMs: config.respondDeadlineMs, logger });
  const failpoints = deps.failpoints ?? NO_FAILPOINTS;
  // The lifecycle comes with the services, built after the dispatcher they kick.
  let settleQueue: (sessionId: string) => void = () => undefined;
  const prompts = await createPromptDelivery(parts, {
    nc,
    config,
    logger,
    failpoints,
    owner: `${epoch}:${randomUUID()}`,
    metrics,
    onUndeliverable: (sessionId) => settleQueue(sessionId),
  });
  const metricsLog = logger.child({ component: 'metrics' });
  metrics.readPromptReceiptsFrom({
    read: () => prompts.countReceipts(),
    maxAgeMs: PROMPT_RECEIPTS_MAX_AGE_MS,
    onError: (err) => metricsLog.warn({ err }, 'could not count the prompt receipts for /metrics; the gauge keeps its last values'),
  });
  const promptServices = await createPromptServices(parts, { nc, config, logger, dispatch: prompts.dispatcher, failpoints });
  let serving = false;

  const { queueLifecycle } = promptServices;
  // The cancelled head's successors may be due now.
  settleQueue = (sessionId) => void queueLifecycle.settle({ sessionId }).then(() => prompts.dispatcher.kick(sessionId));
  const handler = {
    async handleEvent(eventType: string, data: EventData, delivery: EventDelivery) {
      const session = sessionToWake(eventType, data);
      if (session) prompts.dispatcher.kick(session);
      // Before the projection, so it already counts the cancelled entries gone.
      const finished = queueScopeToSettle(eventType, data);
      if (finished) await queueLifecycle.settle(finished);
      return projector.handleEvent(eventType, data, delivery);
    },
  };
  const consumer = eventConsumptionComponent({
    consumer: { nc, topology, handler, logger, metrics, maxEventBytes: config.maxEventBytes, maxDeliver: config.maxDeliver },
    partitions: config.eventPartitions,
    leaseMs: config.eventPartitionLeaseMs,
    ctx,
    owner: replica,
    taskOfSession: (sessionId) => parts.store.taskIdOfSession(sessionId),
    logger,
  });
  const reconcile = bootReconcile({
    store: parts.store,
    enabled: config.bootReconcile,
    lease: bootLease(ctx),
    pageSize: config.reconcilePageSize,
    repair: (taskIds) => projector.reprojectBatch(taskIds),
    logger,
    metrics,
  });
  const lagProbe = consumerLagProbe({ jsm: parts.jsm, topology, consumers: eventConsumers(topology, config.eventPartitions), metrics, logger });
  const refiller = summaryBucketRefillerComponent({
    summaries: {
      listStatusSummariesAfter: (after, limit) => parts.store.listStatusSummariesAfter(after, limit),
      countStatusSummaries: () => countStatusSummaries(ctx),
    },
    nc,
    bucket: parts.summaries,
    publisher: parts.publisher,
    pageSize: config.reconcilePageSize,
    logger,
    metrics,
    expectedStorage: config.summaryBucketStorage,
  });
  const health = healthServerComponent(config.healthPort, metrics.registry, () => {
    const stuck = lagProbe.lag > 0 && consumer.idleForMs > STUCK_AFTER_MS;
    const alive = !nc.isClosed() && !stuck;
    return {
      healthy: alive,
      ready: alive && serving && reconcile.started,
      detail: {
        consumer_lag: lagProbe.lag,
        idle_for_ms: consumer.idleForMs,
        unsettled: consumer.unsettled,
        ...(config.eventPartitions > 1 ? { event_partitions: consumer.heldPartitions } : {}),
        boot_reconcile_started: reconcile.started,
        epoch,
      },
    };
  });

  // The boot reconcile starts last, once live events flow and the endpoints answer, so its walk
  // interleaves with live traffic from its first page; it is also the first to stop, between pages.
  // Stopped in reverse: the endpoints and the consumer stop taking work before the projections they
  // feed settle, and the health server answers (not ready) until the end.
  const components: readonly WorkerComponent[] = [
    health,
    lagProbe,
    refiller,
    {
      name: 'projections',
      start: async () => undefined,
      stop: async () => {
        projector.stopRepublishing();
        await projector.whenIdle();
      },
    },
    consumer,
    promptDispatcherComponent({
      dispatcher: prompts.dispatcher,
      // Then the queues whose finishing event was missed: after the receipts, so an entry a dead
      // owner held is waiting again and cancelled in the same pass.
      reconcile: async (options) => {
        const result = await prompts.reconcile(options);
        await queueLifecycle.settle('all');
        return result;
      },
      reconcileEveryMs: config.reservationTtlMs,
      pollEveryMs: config.dispatchPollMs,
      logger,
    }),
    deliveryRecoveryLoop({
      recover: (options) => clarifications.recoverPendingDeliveries(options),
      graceMs: config.respondDeadlineMs + RECOVERY_MARGIN_MS,
      logger,
    }),
    // Stopped after the endpoints: the collection and queue events of the last requests they answered go out.
    {
      name: 'plan-comment-events',
      start: async () => undefined,
      stop: async () => void (await Promise.all([promptServices.commentEvents.settled(), promptServices.queueStatus.settled()])),
    },
    serviceEndpointsComponent({
      nc,
      topology,
      clarifications,
      tasks: createTasks(parts, logger),
      operations: createOperationsService({
        bus: natsOperationsBus(nc, parts.jsm, topology, eventConsumers(topology, config.eventPartitions)),
        drift: {
          listTaskIdsAfter: (after, limit) => parts.store.listTaskIdsAfter(after, limit),
          findDrift: async (taskIds) => (await findDrift(parts.store, taskIds)).map(toDriftPayload),
        },
        replica: replicaStatsSource({ replica, startedAt, metrics, heldPartitions: () => consumer.heldPartitions }),
      }),
      ...promptServices.endpoints,
      logger,
      maxRequestBytes: config.maxEventBytes,
      metrics,
    }),
    reconcile,
  ];
  const started = await startComponents(deps.arrangeComponents?.(components) ?? components, logger);
  serving = true;
  const log = logger.child({ component: 'worker' });
  // The message stays "worker started", which alerts and scripts match; the fields say where it
  // runs, credentials masked: the NATS servers it was given (an embedder without NATS_URL: the one
  // it is connected to), and the port it bound (the free one it got when 0 was asked).
  log.info(
    {
      database: deps.db.description,
      nats: redactCredentials(config.natsUrl ?? nc.getServer()),
      subjectPrefix: config.subjectPrefix,
      healthPort: health.port,
      stream: topology.eventsStream,
      consumer: topology.consumer,
      epoch,
    },
    'worker started',
  );

  let stopped: Promise<void> | undefined;
  return {
    topology,
    projector,
    promptsIdle: () => prompts.dispatcher.whenIdle(),
    metrics,
    ctx,
    clarifications,
    healthPort: health.port,
    bootReconcile: reconcile.outcome,
    summaryBucketFilled: () => refiller.whenIdle(),
    stop() {
      stopped ??= (async () => {
        serving = false;
        try {
          await started.stop();
        } finally {
          releaseLock();
        }
        log.info('worker stopped');
      })();
      return stopped;
    },
  };
}
