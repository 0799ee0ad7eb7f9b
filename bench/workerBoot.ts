/**
 * (5) of the worker benchmark, on the tasks as seeded: a first start (context), then the boot every
 * restart performs, after an outage changed 1% of the tasks (the target), against bare keyset reads
 * of the data it starts from; a walk with nothing to repair, the bus alone and the refill of an
 * emptied summary bucket (context).
 */
import { performance } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import { createProjectionStore } from '../src/repository/projection/projectionStore.js';
import { NatsSummaryPublisher } from '../src/events/natsSummaryPublisher.js';
import { ensureOutputTopology } from '../src/events/natsTopology.js';
import { topologyFor, type Topology } from '../src/contract/subjects.js';
import type { ReconcileProgress } from '../src/projectors/reconcile.js';
import { refillSummaryBucket, type RefillProgress } from '../src/projectors/refillSummaryBucket.js';
import type { RepositoryContext } from '../src/repository/context.js';
import { systemClock } from '../src/timestamps.js';
import type { WorkerHandle } from '../src/bin/worker.js';
import { WrongAnswerError, onCleanup, progress, secs } from './harness.js';
import { driftLikeAnOutage, settleAfterBulkWrites } from './seed/seeder.js';
import { deleteTopology, type SummaryWatcher } from './bus.js';
import { measureBareKeysetReads, measurePublishCeiling, perSecond, type Rate } from './workerPhases.js';

// A boot after an outage finds every 100th task changed or created meanwhile (1%).
export const OUTAGE_DRIFT_EVERY = 100;

export interface ReconcileRun {
  progress: ReconcileProgress;
  ms: number;
}

export interface BootFigures {
  /** (5c) first start against the seeded tasks. */
  cold: ReconcileRun;
  /** (5a) boot after an outage. */
  reconcile: ReconcileRun;
  /** (5b) bare keyset reads of the same pages. */
  reads: Rate;
  /** (5d) a walk with nothing to repair. */
  recheck: ReconcileRun;
  /** (5e) summary publish + KV put pairs, no database. */
  ceiling: Rate;
  /** (5f) refill of an emptied summary bucket. */
  refill: { progress: RefillProgress; ms: number };
}

export interface BootDeps {
  ctx: RepositoryContext;
  ncWorker: NatsConnection;
  ncClient: NatsConnection;
  jsm: JetStreamManager;
  topology: Topology;
  watcher: SummaryWatcher;
  label: string;
  pageSize: number;
  publishCeiling: number;
  /** A worker in this process with its boot reconcile on. */
  startWorker(): Promise<{ worker: WorkerHandle; stop: () => Promise<void> }>;
}

export async function measureBoot(deps: BootDeps, seeded: { ids: readonly string[]; toggleTasks: number; expectedColdDrift: number }): Promise<BootFigures> {
  const { ctx, label, pageSize } = deps;
  const total = seeded.ids.length;
  const bootReconcile = async (what: string, expectedDrift: number): Promise<ReconcileRun> => {
    progress(`${label} (5) ${what}: boot reconcile of ${total} tasks through a worker, ${expectedDrift} to repair`);
    const reconciler = await deps.startWorker();
    const started = performance.now();
    const summaries0 = deps.watcher.received;
    const ticker = setInterval(() => {
      void reconciler.worker.metrics.reconcileTasks.get().then((m) => {
        const visited = m.values.find((v) => v.labels.result === 'visited')?.value ?? 0;
        progress(`${label}   ${visited}/${total} visited after ${secs(performance.now() - started)}`);
      });
    }, 15_000);
    const result = await reconciler.worker.bootReconcile.finally(() => clearInterval(ticker));
    const ms = performance.now() - started;
    await reconciler.stop();
    if (typeof result === 'string') throw new WrongAnswerError(`${what}: boot reconcile did not run: ${result}`);
    if (result.visited !== total || result.drifted !== expectedDrift || result.repaired !== result.drifted || result.failed !== 0) {
      throw new WrongAnswerError(`${what}: ${JSON.stringify(result)}, expected ${total} visited and ${expectedDrift} drifted, all repaired`);
    }
    if (!(await deps.watcher.waitReceived(summaries0, result.repaired))) {
      throw new WrongAnswerError(`${what}: ${deps.watcher.received - summaries0} summaries published for ${result.repaired} repairs`);
    }
    return { progress: result, ms };
  };

  const cold = await bootReconcile('first start', seeded.expectedColdDrift);
  progress(`${label} vacuum, analyze and checkpoint after the bulk writes`);
  await settleAfterBulkWrites(ctx);
  const outageDrift = await driftLikeAnOutage(ctx, seeded.ids, seeded.toggleTasks, OUTAGE_DRIFT_EVERY, systemClock());
  // Timed on the second pass: the first warms the code paths, plans and caches the reconcile's
  // reads will find warm too.
  progress(`${label} (5) bare keyset reads of ${total} tasks, pages of ${pageSize} (warm-up pass, then the timed one)`);
  await measureBareKeysetReads(ctx, pageSize);
  const reads = await measureBareKeysetReads(ctx, pageSize);
  const reconcile = await bootReconcile('after an outage', outageDrift);
  const recheck = await bootReconcile('nothing left to repair', 0);

  progress(`${label} (5) the bus alone: ${deps.publishCeiling} summary publish + KV put pairs, ${pageSize} in flight`);
  const ceilingTopology = topologyFor(`${deps.topology.prefix.slice(0, -1)}_ceiling.`);
  onCleanup(() => deleteTopology(deps.ncClient, ceilingTopology));
  const { summaries: ceilingBucket } = await ensureOutputTopology(deps.ncWorker, ceilingTopology);
  const ceiling = await measurePublishCeiling(
    new NatsSummaryPublisher(deps.ncWorker, ceilingTopology, ceilingBucket, systemClock),
    deps.publishCeiling,
    pageSize,
  );
  await deleteTopology(deps.ncClient, ceilingTopology);
  progress(`${label}   ${Math.round(perSecond(ceiling))} pairs/s`);

  // (5f) A NATS restart empties the summary bucket (memory storage); the worker refills it from the
  // stored summaries. No worker runs here, so every key is empty when the refill reaches it.
  progress(`${label} (5) refill of an emptied summary bucket from the stored summaries, pages of ${pageSize}`);
  const { summaries: lostBucket } = await ensureOutputTopology(deps.ncWorker, deps.topology);
  await deps.jsm.streams.delete(deps.topology.summaryBucketStream);
  await lostBucket.restoreIfLost();
  const refillPublisher = new NatsSummaryPublisher(deps.ncWorker, deps.topology, lostBucket, systemClock);
  const refillStarted = performance.now();
  const refilled = await refillSummaryBucket({ store: createProjectionStore(ctx), pageSize, fill: (update) => refillPublisher.fillSummary(update) });
  const refill = { progress: refilled, ms: performance.now() - refillStarted };
  if (refilled.filled !== refilled.visited || refilled.corrupt !== 0 || (await lostBucket.status()).values !== refilled.visited) {
    throw new WrongAnswerError(`refill: ${JSON.stringify(refilled)}, bucket holds ${(await lostBucket.status()).values} keys`);
  }
  return { cold, reconcile, reads, recheck, ceiling, refill };
}
