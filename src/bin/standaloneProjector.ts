import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { NatsSummaryPublisher } from '../events/natsSummaryPublisher.js';
import { ensureOutputTopology } from '../events/natsTopology.js';
import { topologyFor, type Topology } from '../events/subjects.js';
import { projectionCapacity } from '../projectors/projectionCapacity.js';
import { Projector } from '../projectors/projector.js';
import { createRepositoryContext, type RepositoryContext } from '../repository/context.js';
import type { Database } from '../repository/database.js';
import { createProjectionStore, type ProjectionStore } from '../repository/projectionStore.js';
import { nextPendingActionProjectionEpoch } from '../repository/meta.js';
import { migrateLatest } from '../repository/migrate.js';
import { systemClock } from '../timestamps.js';

/** A projector publishing to the bus, for one-shot commands (reconcile, replay) beside running workers. */
export async function createStandaloneProjector(
  db: Database,
  nc: NatsConnection,
  config: Pick<Config, 'subjectPrefix' | 'projectionBatchSize' | 'projectionTransactions' | 'summaryBucketStorage'>,
  logger: Logger,
): Promise<{ ctx: RepositoryContext; store: ProjectionStore; projector: Projector; topology: Topology }> {
  await migrateLatest(db.knex);
  const ctx = createRepositoryContext(db);
  const topology = topologyFor(config.subjectPrefix);
  const { summaries } = await ensureOutputTopology(nc, topology, config.summaryBucketStorage);
  const store = createProjectionStore(ctx);
  const capacity = projectionCapacity({
    batchSize: config.projectionBatchSize,
    transactions: config.projectionTransactions,
    connections: db.maxConnections,
    singleWriter: store.capabilities.singleWriter,
  });
  const projector = new Projector({
    store,
    publisher: new NatsSummaryPublisher(nc, topology, summaries, systemClock),
    logger,
    capacity,
    epoch: await nextPendingActionProjectionEpoch(ctx),
  });
  return { ctx, store, projector, topology };
}
