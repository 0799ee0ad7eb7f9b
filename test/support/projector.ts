import { silentLogger } from '../../src/logger.js';
import { projectionCapacity, type ProjectionCapacityInput } from '../../src/projectors/projectionCapacity.js';
import { Projector, type ProjectorOptions } from '../../src/projectors/projector.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';

export type TestProjectorOptions = Pick<ProjectorOptions, 'publisher' | 'metrics'> &
  Partial<Pick<ProjectorOptions, 'logger' | 'epoch' | 'store' | 'republishAfterMs'>> &
  Omit<ProjectionCapacityInput, 'singleWriter'>;

/**
 * A projector over a test database (or `store`, default the database's), its capacity computed from
 * the settings as the worker's assembly does.
 */
export function createTestProjector(ctx: RepositoryContext, options: TestProjectorOptions): Projector {
  const { batchSize, transactions, connections, store = createProjectionStore(ctx), ...rest } = options;
  return new Projector({
    logger: silentLogger(),
    epoch: '1',
    ...rest,
    store,
    capacity: projectionCapacity({ batchSize, transactions, connections, singleWriter: store.capabilities.singleWriter }),
  });
}
