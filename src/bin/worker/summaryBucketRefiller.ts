import type { NatsConnection } from '@nats-io/transport-node';
import pRetry from 'p-retry';
import type { Logger } from 'pino';
import { fixedBackoff } from '../../background/backoff.js';
import { KeyedCoalescer } from '../../background/keyedCoalescer.js';
import type { NatsSummaryPublisher } from '../../events/natsSummaryPublisher.js';
import type { BucketStorage, SummaryBucket } from '../../events/summaryBucket.js';
import type { Metrics } from '../../metrics.js';
import { refillSummaryBucket, type StoredSummaries } from '../../projectors/refillSummaryBucket.js';
import type { WorkerComponent } from './component.js';

export interface BucketRefillerDeps {
  /** The database's stored summaries: the bucket is refilled from them. */
  summaries: StoredSummaries;
  nc: NatsConnection;
  bucket: SummaryBucket;
  publisher: NatsSummaryPublisher;
  pageSize: number;
  logger: Logger;
  metrics?: Metrics;
  /** The storage configured for the bucket: an existing bucket with another one is kept, with a warning. */
  expectedStorage?: BucketStorage;
  /** Wait before a failed refill runs again (default 5 s). */
  retryMs?: number;
}

export interface BucketRefiller {
  /** Settles once the start check is done and no refill runs (a failed one that waits to run again still runs). */
  whenIdle(): Promise<void>;
  stop(): Promise<void>;
}

/** The refiller's one key in its coalescer: every trigger asks for the same refill. */
const BUCKET = 'bucket';

/**
 * Keeps the summary bucket filled from the database: at start when it holds fewer keys than there are
 * stored summaries (it is new, or the server restarted while no worker ran), and whenever the bucket
 * is recreated after the server lost it (a put failed, or the connection came back from a restarted
 * server). One refill at a time; a trigger during one runs it once more afterwards; a failed one runs
 * again after `retryMs`, until it succeeds or the refiller stops.
 */
export function startBucketRefiller(deps: BucketRefillerDeps): BucketRefiller {
  const log = deps.logger.child({ component: 'bucket-refiller' });
  const stopped = new AbortController();
  // A fixed wait, retried for as long as the worker runs: the bucket is only a convenience copy, so
  // there is no point at which giving up would serve anyone better.
  const retry = { retries: Number.POSITIVE_INFINITY, ...fixedBackoff(deps.retryMs ?? 5000), signal: stopped.signal, unref: true };
  /** Why the next refill runs: the latest trigger's reason. */
  let reason = '';

  const refillOnce = async (why: string): Promise<void> => {
    const started = performance.now();
    const progress = await refillSummaryBucket({
      store: deps.summaries,
      pageSize: deps.pageSize,
      fill: (update) => deps.publisher.fillSummary(update),
      shouldStop: () => stopped.signal.aborted,
      onPage: (p) => log.debug(p, 'summary bucket refill page'),
    });
    deps.metrics?.bucketRefills.inc({ result: 'done' });
    deps.metrics?.bucketKeysFilled.inc(progress.filled);
    log.info({ reason: why, ...progress, ms: Math.round(performance.now() - started) }, 'summary bucket refilled from the database');
  };

  const refills = new KeyedCoalescer<string>({
    concurrency: 1,
    run: async () => {
      const why = reason;
      await pRetry(() => refillOnce(why), {
        ...retry,
        onFailedAttempt: ({ error }) => {
          deps.metrics?.bucketRefills.inc({ result: 'failed' });
          log.error({ err: error, reason: why }, 'summary bucket refill failed; retrying');
        },
      }).catch((err: unknown) => {
        // Stopping aborts the wait; p-retry retries no TypeError (a bug, not an outage).
        if (!stopped.signal.aborted) log.error({ err, reason: why }, 'summary bucket refill gave up');
      });
    },
  });
  const refill = (why: string): void => {
    if (stopped.signal.aborted) return;
    reason = why;
    refills.mark(BUCKET);
  };

  deps.bucket.onRecreated(() => refill('the bus lost the bucket; recreated'));
  const checked = (async () => {
    try {
      const [status, stored] = await Promise.all([deps.bucket.status(), deps.summaries.countStatusSummaries()]);
      if (deps.expectedStorage && status.storage !== deps.expectedStorage) {
        log.warn(
          { storage: status.storage },
          `the summary bucket exists with ${status.storage} storage; keeping it (delete the bucket to change it: the worker refills it)`,
        );
      }
      if (status.values < stored) refill(`the bucket holds ${status.values} keys for ${stored} stored summaries`);
    } catch (err) {
      log.warn({ err }, 'could not compare the summary bucket with the database; not refilling it at start');
    }
  })();
  void (async () => {
    // A restarted server comes back without a memory bucket; recreate it now rather than at the next put.
    for await (const status of deps.nc.status()) {
      if (stopped.signal.aborted) break;
      if (status.type === 'reconnect')
        deps.bucket.restoreIfLost().catch((err: Error) => log.warn({ err }, 'could not check the summary bucket after reconnecting'));
    }
  })();

  return {
    whenIdle: async () => {
      await checked;
      await refills.whenIdle();
    },
    stop: async () => {
      stopped.abort();
      await refills.stop();
    },
  };
}

/** The refiller as a worker component; `whenIdle()` before start waits for nothing. */
export function summaryBucketRefillerComponent(deps: BucketRefillerDeps): WorkerComponent & Pick<BucketRefiller, 'whenIdle'> {
  let refiller: BucketRefiller | undefined;
  return {
    name: 'summary-bucket-refiller',
    async start() {
      refiller = startBucketRefiller(deps);
    },
    stop: async () => refiller?.stop(),
    whenIdle: async () => refiller?.whenIdle(),
  };
}
