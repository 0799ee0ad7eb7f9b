/**
 * The worker `npm run bench:send` measures through the bus: started on the scratch database under a
 * topology of its own, with the agent listening on its prompt subjects and a client, and stopped
 * with all of it afterwards. The bench starts one per dispatcher capacity it measures.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { startWorker, type WorkerConfig, type WorkerHandle } from '../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import type { Topology } from '../src/contract/subjects.js';
import { silentLogger } from '../src/logger.js';
import { rawRows } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { openPlanCommentStore } from '../src/repository/planComments/planCommentStore.js';
import { benchTopology, benchWorkerConfig } from './bus.js';
import { onCleanup, sleep } from './harness.js';
import type { ScratchDatabase } from './scratchDatabase.js';
import { startPromptAgent, type PromptAgent } from './sendQueueParts.js';

/** A running worker on the scratch database, the agent on its prompt subjects, and a client of its endpoints. */
export interface SendWorker {
  nc: NatsConnection;
  prefix: string;
  topology: Topology;
  worker: WorkerHandle;
  jsm: JetStreamManager;
  agent: PromptAgent;
  client: PendingProjectorClient;
  scratch: ScratchDatabase;
  receiptTable: string;
}

export interface SendWorkerOptions {
  dialect: DialectName;
  nc: NatsConnection;
  scratch: ScratchDatabase;
  /** The worker's settings besides the bench's defaults (bus.ts) and the capacity. */
  config: Partial<WorkerConfig>;
  /** Sessions the worker's dispatcher delivers at once (PROMPT_DISPATCH_CONCURRENCY). */
  capacity: number;
}

/** Runs `fn` with a fresh worker; afterwards checks the agent's prompts and stops the worker and its topology. */
export async function withSendWorker<T>(options: SendWorkerOptions, fn: (bus: SendWorker) => Promise<T>): Promise<T> {
  const { dialect, nc, scratch } = options;
  const { prefix, topology, remove: removeTopology } = benchTopology(nc, 'benchsend', dialect);
  const receiptTable = (await openPlanCommentStore(scratch.ctx)).schema.receiptTable ?? 'queued_messages';
  const worker = await startWorker({
    db: scratch.db,
    nc,
    logger: silentLogger(),
    config: benchWorkerConfig(prefix, { ...options.config, promptDispatchConcurrency: options.capacity }),
  });
  const jsm = await jetstreamManager(nc);
  const stopWorker = onCleanup(() => worker.stop());
  try {
    // The seeded tasks exist before the worker: its start-up refill of the summary bucket is over before any figure.
    await worker.summaryBucketFilled();
    const agent = startPromptAgent(nc, topology);
    const client = createPendingProjectorClient(nc, { prefix });
    const result = await fn({ nc, prefix, topology, worker, jsm, agent, client, scratch, receiptTable });
    agent.stop();
    return result;
  } finally {
    await stopWorker();
    await removeTopology();
  }
}

/** Nothing left in flight: no dispatcher pass, no unsettled event on the worker's consumer, no projection. */
export async function untilWorkerIdle(bus: Pick<SendWorker, 'worker' | 'jsm'>): Promise<void> {
  await bus.worker.promptsIdle();
  for (;;) {
    const info = await bus.jsm.consumers.info(bus.worker.topology.eventsStream, bus.worker.topology.consumer);
    if (info.num_pending === 0 && info.num_ack_pending === 0) break;
    await sleep(1);
  }
  await bus.worker.projector.whenIdle();
}

/**
 * Until the receipt was settled, its pass's events are in the events stream, the worker's consumer
 * has settled every event, and the projections they asked for are done: an idle worker.
 */
export async function quiesce(bus: SendWorker, receiptId: string): Promise<void> {
  while ((await rawRows(bus.scratch.ctx, `SELECT 1 FROM ${bus.receiptTable} WHERE id = ?`, [receiptId])).length > 0) await sleep(1);
  await untilWorkerIdle(bus);
}
