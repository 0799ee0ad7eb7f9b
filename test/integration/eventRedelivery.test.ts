import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topologyFor } from '../../src/contract/subjects.js';
import type { EventData } from '../../src/contract/envelope.js';
import { EventConsumer, type EventDelivery } from '../../src/events/natsEventConsumer.js';
import { ensureTopology } from '../../src/events/natsTopology.js';
import { silentLogger } from '../../src/logger.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsAvailable, uniquePrefix } from '../support/nats.js';

/**
 * The projector republishes a redelivered event's task (a replica that took it may have died between
 * its publish and COMMIT): the consumer must say which deliveries are redeliveries, on the real server.
 */
describe.skipIf(!natsAvailable())('the event consumer on a redelivery', () => {
  let nc: NatsConnection;
  const prefix = uniquePrefix('redelivery');
  const topology = topologyFor(prefix);

  beforeAll(async () => {
    nc = await connectTestNats();
    await ensureTopology(nc, { topology, streamMaxAgeMs: 3_600_000, maxDeliver: 5, ackWaitMs: 5000 });
  });
  afterAll(async () => {
    await deleteTopology(nc, prefix);
    await nc.close();
  });

  it('tells the handler a first delivery from a redelivery after a failed one', async () => {
    const seen: Array<{ taskId: string | undefined; delivery: EventDelivery }> = [];
    const handler = {
      async handleEvent(_type: string, data: EventData, delivery: EventDelivery) {
        seen.push({ taskId: data.task_id, delivery });
        // A database blip on the first delivery: the consumer naks it with a delay, and the server redelivers it.
        if (seen.length === 1) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
        return 'projected';
      },
    };
    const consumer = new EventConsumer({ nc, topology, handler, logger: silentLogger(), maxEventBytes: 1 << 20, maxDeliver: 5 });
    await consumer.start();
    try {
      await nc.publish(`${prefix}turn.started`, envelope('turn.started', { task_id: 'task-1', session_id: 'session-1' }));
      await eventually(() => (seen.length >= 2 ? true : undefined), 10_000, 'the redelivery');
    } finally {
      await consumer.stop();
    }
    expect(seen.map((s) => s.delivery.redelivered)).toEqual([false, true]);
    expect(seen.map((s) => s.taskId)).toEqual(['task-1', 'task-1']);
  });
});
