import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { ProjectionStore } from '../repository/projection/projectionStore.js';
import { reconcileTasks, type ReconcileProgress } from './reconcile.js';

/**
 * How a boot reconcile ended: its progress when it walked every task (or stopped early at shutdown),
 * else why it did not: disabled, another replica holds the lease, the lease was lost mid-walk
 * (another replica goes on), or it failed (logged).
 */
export type BootReconcileOutcome = ReconcileProgress | 'skipped' | 'held_elsewhere' | 'lease_lost' | 'failed';

/** A named lease held by this process: one replica at a time runs what it guards. */
export interface Lease {
  /** Acquires or renews it; false when another owner holds it. */
  acquire(): Promise<boolean>;
  release(): Promise<void>;
}

export interface BootReconcileDeps {
  store: ProjectionStore;
  /** false: the outcome is 'skipped' at once. */
  enabled: boolean;
  lease: Lease;
  pageSize: number;
  /** The projector's batched projection; resolves to the ids that failed. */
  repair(taskIds: readonly string[]): Promise<readonly string[]>;
  logger: Logger;
  metrics?: Metrics;
}

export interface BootReconcile {
  readonly name: string;
  /** Starts the walk in the background; resolves at once. */
  start(): Promise<void>;
  /** Stops the walk between pages and waits for it (and its last repairs). */
  stop(): Promise<void>;
  /** True once the lease was decided (or the reconcile is disabled): readiness waits for it. */
  readonly started: boolean;
  /** Settles when the walk ended, never rejects. */
  readonly outcome: Promise<BootReconcileOutcome>;
}

/**
 * The boot reconcile under its lease: every task is compared with its stored summary and drifted
 * ones repaired, while live events keep flowing and coalesce with it. The lease is renewed before
 * each page, so a replica that stalls longer than its lease hands the rest to the next one.
 */
export function bootReconcile(deps: BootReconcileDeps): BootReconcile {
  const log = deps.logger.child({ component: 'boot-reconcile' });
  let started = !deps.enabled;
  let stopping = false;
  let leaseLost = false;
  let settle!: (outcome: BootReconcileOutcome) => void;
  const outcome = new Promise<BootReconcileOutcome>((resolve) => (settle = resolve));
  let walk: Promise<void> | undefined;

  const run = async (): Promise<BootReconcileOutcome> => {
    if (!deps.enabled) return 'skipped';
    if (!(await deps.lease.acquire())) {
      started = true;
      log.info('boot reconcile is running on another replica');
      return 'held_elsewhere';
    }
    started = true;
    let visited = 0;
    try {
      const progress = await reconcileTasks({
        store: deps.store,
        pageSize: deps.pageSize,
        repair: deps.repair,
        shouldStop: () => stopping,
        beforePage: async () => {
          if (await deps.lease.acquire()) return;
          leaseLost = true;
          throw new Error('boot reconcile lease lost');
        },
        onPage: (p, drift) => {
          deps.metrics?.reconcileTasks.inc({ result: 'visited' }, p.visited - visited);
          deps.metrics?.reconcileTasks.inc({ result: 'drifted' }, drift.length);
          visited = p.visited;
          log.debug(p, 'boot reconcile page');
        },
      });
      log.info(progress, 'boot reconcile finished');
      return progress;
    } finally {
      await deps.lease.release().catch(() => undefined);
    }
  };

  return {
    name: 'boot-reconcile',
    get started() {
      return started;
    },
    outcome,
    async start() {
      walk = run().then(settle, (err: unknown) => {
        if (leaseLost) {
          log.warn('boot reconcile lease lost: the replica that took it over reconciles the tasks');
          settle('lease_lost');
          return;
        }
        log.error({ err }, 'boot reconcile failed');
        settle('failed');
      });
    },
    async stop() {
      stopping = true;
      await walk;
    },
  };
}
