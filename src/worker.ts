import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { EventConsumer } from './events/natsEventConsumer.js';
import { NatsSummaryPublisher } from './events/natsSummaryPublisher.js';
import { ensureTopology } from './events/natsTopology.js';
import { topologyFor, type Topology } from './events/subjects.js';
import { startHealthServer } from './healthServer.js';
import { startBucketRefiller } from './bucketRefiller.js';
import { createMetrics, type Metrics } from './metrics.js';
import { projectionCapacity } from './projectors/projectionCapacity.js';
import { Projector } from './projectors/projector.js';
import { reconcileTasks, type ReconcileProgress } from './projectors/reconcile.js';
import { createRepositoryContext, type RepositoryContext } from './repository/context.js';
import type { Database } from './repository/database.js';
import { createProjectionStore } from './repository/projectionStore.js';
import { acquireLease, releaseLease } from './repository/leases.js';
import { nextPendingActionProjectionEpoch } from './repository/meta.js';
import { migrateLatest } from './repository/migrate.js';
import { systemClock, type Clock } from './timestamps.js';
import { createClarificationService, type ClarificationService } from './services/clarificationService.js';
import { startServiceEndpoints } from './services/serviceEndpoints.js';
import { NatsClarificationDelivery } from './events/natsClarificationDelivery.js';
import { NatsEventPublisher } from './events/natsEventPublisher.js';

export type WorkerConfig = Pick<
  Config,
  | 'subjectPrefix'
  | 'healthPort'
  | 'projectionBatchSize'
  | 'projectionTransactions'
  | 'maxEventBytes'
  | 'maxDeliver'
  | 'ackWaitMs'
  | 'streamMaxAgeMs'
  | 'reconcilePageSize'
  | 'bootReconcile'
  | 'respondDeadlineMs'
> &
  Partial<Pick<Config, 'summaryBucketStorage'>>;

export interface WorkerDeps {
  db: Database;
  nc: NatsConnection;
  config: WorkerConfig;
  logger: Logger;
  clock?: Clock;
}

export interface WorkerHandle {
  readonly topology: Topology;
  readonly projector: Projector;
  readonly metrics: Metrics;
  readonly healthPort: number;
  readonly ctx: RepositoryContext;
  /** The clarification lifecycle the endpoints serve (benchmarks call it directly). */
  readonly clarifications: ClarificationService;
  /** Resolves when the boot reconcile finished (or was skipped or handed to another replica). */
  readonly bootReconcile: Promise<ReconcileProgress | 'skipped' | 'held_elsewhere'>;
  /** Resolves once the summary bucket was checked against the database and no refill of it runs. */
  summaryBucketFilled(): Promise<void>;
  /** Stops pulling, settles in-flight events, stops reconcile and endpoints. Idempotent. */
  stop(): Promise<void>;
}

const BOOT_LEASE = 'boot_reconcile';
const LEASE_TTL_MS = 60_000;

/**
 * Wires one worker: migrations, the epoch, the NATS topology, the projector and its consumer, the
 * request/reply endpoints, the health server, and the boot reconcile under a lease (one replica at a
 * time; live events keep flowing meanwhile and coalesce with it).
 */
export async function startWorker(deps: WorkerDeps): Promise<WorkerHandle> {
  const { db, nc, config, logger } = deps;
  const clock = deps.clock ?? systemClock;
  const log = logger.child({ component: 'worker' });
  const ctx = createRepositoryContext(db, clock);
  const applied = await migrateLatest(db.knex);
  if (applied.length > 0) log.info({ applied }, 'applied migrations');
  const epoch = await nextPendingActionProjectionEpoch(ctx);
  const topology = topologyFor(config.subjectPrefix);
  const { summaries, jsm } = await ensureTopology(nc, {
    topology,
    streamMaxAgeMs: config.streamMaxAgeMs,
    maxDeliver: config.maxDeliver,
    ackWaitMs: config.ackWaitMs,
    bucketStorage: config.summaryBucketStorage,
  });
  const metrics = createMetrics();
  const publisher = new NatsSummaryPublisher(nc, topology, summaries, clock);
  const store = createProjectionStore(ctx);
  const capacity = projectionCapacity({
    batchSize: config.projectionBatchSize,
    transactions: config.projectionTransactions,
    connections: db.maxConnections,
    singleWriter: store.capabilities.singleWriter,
  });
  const projector = new Projector({ store, publisher, logger, metrics, capacity, epoch });
  const refiller = startBucketRefiller({ ctx, nc, bucket: summaries, publisher, pageSize: config.reconcilePageSize, logger, metrics, expectedStorage: config.summaryBucketStorage });
  const consumer = new EventConsumer({ nc, topology, handler: projector, logger, metrics, maxEventBytes: config.maxEventBytes, maxDeliver: config.maxDeliver });
  await consumer.start();
  const clarifications = createClarificationService({
    ctx,
    delivery: new NatsClarificationDelivery(nc, topology, clock),
    events: new NatsEventPublisher(nc, topology, clock),
    refreshSummary: (taskId) => projector.reproject(taskId),
    respondDeadlineMs: config.respondDeadlineMs,
    logger,
  });
  // Claims a crashed process left between claim and delivery (domain reference §7.5). Younger claims
  // may still be in delivery on another replica, and a claim whose resume cannot be checked (bus
  // down) must not be guessed at: both get another look after the grace window, until none is left.
  const recoveryGraceMs = config.respondDeadlineMs + 5000;
  let recoveryTimer: NodeJS.Timeout | undefined;
  let recovery: Promise<unknown> = Promise.resolve();
  let recoveryStopped = false;
  const recoverClaims = async () => {
    const run = clarifications.recoverPendingDeliveries({ minClaimAgeMs: recoveryGraceMs }).catch((err: Error) => {
      log.error({ err }, 'clarification delivery recovery failed');
      return undefined;
    });
    recovery = run;
    const report = await run;
    if (!recoveryStopped && (report === undefined || report.deferred > 0)) {
      recoveryTimer = setTimeout(() => void recoverClaims(), recoveryGraceMs);
      recoveryTimer.unref();
    }
    return report;
  };
  await recoverClaims();
  const endpoints = await startServiceEndpoints({ nc, topology, ctx, projector, clarifications, logger, maxRequestBytes: config.maxEventBytes });

  let stopping = false;
  let reconcileStarted = !config.bootReconcile;
  let lag = 0;
  const lagTimer = setInterval(() => {
    jsm.consumers
      .info(topology.eventsStream, topology.consumer)
      .then((info) => {
        lag = info.num_pending;
        metrics.consumerLag.set(info.num_pending);
        metrics.ackPending.set(info.num_ack_pending);
      })
      .catch((err: Error) => log.warn({ err: err.message }, 'could not read consumer info'));
  }, 5000);
  lagTimer.unref();

  const health = await startHealthServer(config.healthPort, metrics.registry, () => {
    // Lag alone is normal under load; lag with no event settled for a minute means stuck.
    const stuck = lag > 0 && consumer.idleForMs > 60_000;
    const alive = !nc.isClosed() && !stuck;
    return {
      healthy: alive,
      ready: alive && reconcileStarted && !stopping,
      detail: { consumer_lag: lag, idle_for_ms: consumer.idleForMs, unsettled: consumer.unsettled, boot_reconcile_started: reconcileStarted, epoch },
    };
  });
  log.info({ healthPort: health.port, stream: topology.eventsStream, consumer: topology.consumer, epoch }, 'worker started');

  const owner = randomUUID();
  const bootReconcile = (async (): Promise<ReconcileProgress | 'skipped' | 'held_elsewhere'> => {
    if (!config.bootReconcile) return 'skipped';
    if (!(await acquireLease(ctx, BOOT_LEASE, owner, LEASE_TTL_MS))) {
      reconcileStarted = true;
      log.info('boot reconcile is running on another replica');
      return 'held_elsewhere';
    }
    reconcileStarted = true;
    let visited = 0;
    try {
      const progress = await reconcileTasks({
        store,
        pageSize: config.reconcilePageSize,
        repair: (taskIds) => projector.reprojectBatch(taskIds),
        shouldStop: () => stopping,
        beforePage: async () => {
          if (!(await acquireLease(ctx, BOOT_LEASE, owner, LEASE_TTL_MS))) throw new Error('boot reconcile lease lost');
        },
        onPage: (p, drift) => {
          metrics.reconcileTasks.inc({ result: 'visited' }, p.visited - visited);
          metrics.reconcileTasks.inc({ result: 'drifted' }, drift.length);
          visited = p.visited;
          log.debug(p, 'boot reconcile page');
        },
      });
      log.info(progress, 'boot reconcile finished');
      return progress;
    } finally {
      await releaseLease(ctx, BOOT_LEASE, owner).catch(() => undefined);
    }
  })().catch((err: Error) => {
    log.error({ err }, 'boot reconcile failed');
    throw err;
  });
  bootReconcile.catch(() => undefined);

  let stopped: Promise<void> | undefined;
  return {
    topology,
    projector,
    metrics,
    ctx,
    clarifications,
    healthPort: health.port,
    bootReconcile,
    summaryBucketFilled: () => refiller.whenIdle(),
    stop() {
      stopped ??= (async () => {
        stopping = true;
        clearInterval(lagTimer);
        recoveryStopped = true;
        clearTimeout(recoveryTimer);
        await recovery;
        await endpoints.stop();
        await consumer.stop();
        await bootReconcile.catch(() => undefined);
        await projector.whenIdle();
        await refiller.stop();
        await health.close();
        log.info('worker stopped');
      })();
      return stopped;
    },
  };
}
