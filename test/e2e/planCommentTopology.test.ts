import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureOutputTopology } from '../../src/events/natsTopology.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { startWorker } from '../../src/bin/worker.js';
import { ERROR_CODES } from '../../src/errors.js';
import { silentLogger } from '../../src/logger.js';
import { createDatabase } from '../../src/repository/database.js';
import { isAvailable, openTestDatabase } from '../support/databases.js';
import { testWorkerConfig } from '../support/workerConfig.js';

describe('the output stream and task_plan.comments.changed', () => {
  let nc: NatsConnection;
  const prefix = uniquePrefix('plantopo');
  beforeAll(async () => {
    nc = await connectTestNats();
  });
  afterAll(async () => {
    await deleteTopology(nc, prefix);
    await nc?.drain();
  });

  it('an output stream made before plan comments and plan deletions gets their subjects added, keeping its messages', async () => {
    const topology = topologyFor(prefix);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: topology.outputStream,
      subjects: [topology.summarySubject, topology.sessionPendingSubject],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
    });
    const js = jsm.jetstream();
    await js.publish(topology.summarySubject, new TextEncoder().encode('{}'));
    await ensureOutputTopology(nc, topology);
    const info = await jsm.streams.info(topology.outputStream);
    expect([...info.config.subjects].sort()).toEqual(
      [topology.planCommentsSubject, topology.planDeletedSubject, topology.sessionPendingSubject, topology.summarySubject].sort(),
    );
    expect(info.state.messages).toBe(1);
    const ack = await js.publish(topology.planCommentsSubject, new TextEncoder().encode('{}'), { msgID: 't:p:1' });
    expect(ack.stream).toBe(topology.outputStream);
    expect((await js.publish(topology.planCommentsSubject, new TextEncoder().encode('{}'), { msgID: 't:p:1' })).duplicate).toBe(true);
    expect((await js.publish(topology.planDeletedSubject, new TextEncoder().encode('{}'), { msgID: 't:p:task_plan.deleted' })).stream).toBe(
      topology.outputStream,
    );
  });
});

describe.skipIf(!isAvailable('postgres'))('a worker on a PostgreSQL pool of one connection', () => {
  it('refuses to start, naming the admission pool rule', async () => {
    const t = await openTestDatabase('postgres');
    const single = createDatabase(t.url, { maxConnections: 1, searchPath: t.searchPath });
    const nc = await connectTestNats();
    const prefix = uniquePrefix('plan_pool');
    try {
      await expect(startWorker({ db: single, nc, config: testWorkerConfig(prefix), logger: silentLogger() })).rejects.toMatchObject({
        code: ERROR_CODES.ADMISSION_POOL_TOO_SMALL,
      });
    } finally {
      await deleteTopology(nc, prefix);
      await nc.drain();
      await single.destroy();
      await t.close();
    }
  });
});
