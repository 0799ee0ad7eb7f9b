import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureOutputTopology } from '../../src/events/natsTopology.js';
import { topologyFor } from '../../src/events/subjects.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';

describe('the output stream and task_plan.comments_updated', () => {
  let nc: NatsConnection;
  const prefix = uniquePrefix('plantopo');
  beforeAll(async () => {
    nc = await connectTestNats();
  });
  afterAll(async () => {
    await deleteTopology(nc, prefix);
    await nc?.drain();
  });

  it('an output stream made before plan comments gets their subject added, keeping its messages', async () => {
    const topology = topologyFor(prefix);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: topology.outputStream, subjects: [topology.summarySubject, topology.sessionPendingSubject], retention: RetentionPolicy.Limits, storage: StorageType.File });
    const js = jsm.jetstream();
    await js.publish(topology.summarySubject, new TextEncoder().encode('{}'));
    await ensureOutputTopology(nc, topology);
    const info = await jsm.streams.info(topology.outputStream);
    expect([...info.config.subjects].sort()).toEqual([topology.planCommentsSubject, topology.sessionPendingSubject, topology.summarySubject].sort());
    expect(info.state.messages).toBe(1);
    const ack = await js.publish(topology.planCommentsSubject, new TextEncoder().encode('{}'), { msgID: 't:p:1' });
    expect(ack.stream).toBe(topology.outputStream);
    expect((await js.publish(topology.planCommentsSubject, new TextEncoder().encode('{}'), { msgID: 't:p:1' })).duplicate).toBe(true);
  });
});
