import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsClarificationDelivery } from '../../src/events/clarifications/natsClarificationDelivery.js';
import { topologyFor, type Topology } from '../../src/contract/subjects.js';
import type { ClarificationDeliveryPayload } from '../../src/contract/clarificationPayloads.js';
import { systemClock } from '../../src/timestamps.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';

const payload = (pendingId: string): ClarificationDeliveryPayload => ({
  pending_id: pendingId,
  claim_id: `claim-${pendingId}`,
  session_id: 'session-1',
  task_id: 'task-1',
  clarification_turn_id: 'turn-1',
  status: 'rejected',
  answers: [],
  rejected: true,
  reject_reason: '',
  responded_at: '2026-01-01T00:00:00Z',
});

describe('publishing a detached resume within its deadline', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const prefixes: string[] = [];
  const fresh = (): Topology => {
    const prefix = uniquePrefix('resume');
    prefixes.push(prefix);
    return topologyFor(prefix);
  };
  const addResumeStream = (topology: Topology, maxMsgSize?: number) =>
    jsm.streams.add({ name: topology.agentResumeStream, subjects: topology.agentResumeSubjects, ...(maxMsgSize ? { max_msg_size: maxMsgSize } : {}) });

  beforeAll(async () => {
    nc = await connectTestNats();
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    for (const prefix of prefixes) await deleteTopology(nc, prefix);
    await nc?.drain();
  });

  it('keeps retrying while no stream captures the subject, and is accepted once one does', async () => {
    const topology = fresh();
    const delivery = new NatsClarificationDelivery(nc, topology, systemClock);
    const publishing = delivery.publishResume('session-1', payload('p1'), 20_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await addResumeStream(topology);
    expect(await publishing).toEqual({ accepted: true, duplicate: false });
    expect((await jsm.streams.info(topology.agentResumeStream)).state.messages).toBe(1);
    // The same claim again: deduplicated by its message id, still accepted.
    expect(await delivery.publishResume('session-1', payload('p1'), 5000)).toEqual({ accepted: true, duplicate: true });
  });

  it('reports the missing stream when none appears before the deadline', async () => {
    const delivery = new NatsClarificationDelivery(nc, fresh(), systemClock);
    // Long enough for the server's "no stream" answer to come back on a loaded host (with 300 ms, the
    // last attempt itself sometimes ran out of time and the reason read "timeout").
    expect(await delivery.publishResume('session-1', payload('p2'), 2000)).toEqual({ accepted: false, reason: 'jetstream is not enabled' });
  });

  it('gives up at once on any other refusal of the stream', async () => {
    const topology = fresh();
    await addResumeStream(topology, 16);
    const delivery = new NatsClarificationDelivery(nc, topology, systemClock);
    expect(await delivery.publishResume('session-1', payload('p3'), 20_000)).toEqual({ accepted: false, reason: expect.stringMatching(/maximum/i) });
  });

  it('makes no attempt with no time left, yet reports a resume the stream already holds as accepted', async () => {
    const topology = fresh();
    await addResumeStream(topology);
    const delivery = new NatsClarificationDelivery(nc, topology, systemClock);
    expect(await delivery.publishResume('session-1', payload('p4'), 0)).toEqual({ accepted: false, reason: 'no attempt' });
    expect(await delivery.publishResume('session-1', payload('p4'), 5000)).toEqual({ accepted: true, duplicate: false });
    expect(await delivery.publishResume('session-1', payload('p4'), 0)).toEqual({ accepted: true, duplicate: false });
  });
});
