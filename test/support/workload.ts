import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import type { RepositoryContext } from '../../src/repository/context.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../../src/repository/clarifications/clarificationClaims.js';
import { findActiveClarificationMessages } from '../../src/repository/clarifications/clarifications.js';
import { createMessage } from '../../src/repository/messages.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import { completeTurn, getActiveTurn, startTurn } from '../../src/repository/turns/turns.js';
import { envelope } from './nats.js';
import { seedClarificationBundle, seedSession } from './seed.js';

export interface WorkloadTask {
  taskId: string;
  sessionId: string;
}

export async function seedWorkloadTasks(ctx: RepositoryContext, count: number): Promise<WorkloadTask[]> {
  const tasks: WorkloadTask[] = [];
  for (let i = 0; i < count; i++) {
    const { taskId, sessionId } = await seedSession(ctx);
    await startTurn(ctx, sessionId);
    tasks.push({ taskId, sessionId });
  }
  return tasks;
}

/** A deterministic pseudo-random sequence, so a failing run can be reproduced. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/**
 * Publishes like a Kandev backend should: through JetStream with an acknowledgement, retried until
 * the server has it, so a NATS restart delays events but never drops them.
 */
async function publishDurably(nc: NatsConnection, subject: string, data: Uint8Array, deadlineMs = 30_000): Promise<void> {
  const js = jetstream(nc, { timeout: 2000 });
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      await js.publish(subject, data);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * One random, realistic change to one task's authoritative state, committed first and then
 * announced on the bus (the order Kandev uses: database, then event).
 */
export async function randomStep(
  ctx: RepositoryContext,
  nc: NatsConnection,
  prefix: string,
  tasks: readonly WorkloadTask[],
  random: () => number,
  /** How the event goes out (default: a JetStream publish retried for 30 s until acknowledged). */
  publish: (subject: string, data: Uint8Array) => Promise<void> = (subject, data) => publishDurably(nc, subject, data),
): Promise<void> {
  const task = tasks[Math.floor(random() * tasks.length)]!;
  const { taskId, sessionId } = task;
  const announce = (type: string, extra: Record<string, unknown> = {}) =>
    publish(`${prefix}${type}`, envelope(type, { task_id: taskId, session_id: sessionId, ...extra }));
  const roll = random();
  const open = await getActiveTurn(ctx, sessionId);
  if (!open || roll < 0.12) {
    if (open) await completeTurn(ctx, open.id);
    await startTurn(ctx, sessionId);
    await announce('turn.started');
    return;
  }
  if (roll < 0.35) {
    await seedClarificationBundle(ctx, { sessionId, turnId: open.id, statuses: ['pending', 'pending'] });
    await announce('message.added', { type: 'clarification_request', requests_input: true });
  } else if (roll < 0.55) {
    const active = await findActiveClarificationMessages(ctx, sessionId);
    const pendingId = active[0]?.metadata.pending_id;
    if (typeof pendingId === 'string') {
      const claim = await claimClarificationBundle(ctx, pendingId, { status: 'rejected' });
      if (claim.claimed)
        await finalizeClarificationDelivery(
          ctx,
          claim.rows.map((r) => r.id),
        );
    }
    await announce('message.updated', { type: 'clarification_request' });
  } else if (roll < 0.7) {
    await createMessage(ctx, { sessionId, turnId: open.id, type: 'permission_request', metadata: random() < 0.5 ? {} : { status: 'approved' } });
    await announce('permission_request.received');
  } else if (roll < 0.8) {
    await createMessage(ctx, { sessionId, type: 'script_execution', content: 'agent boot', completedTurn: true });
    await announce('message.added', { type: 'script_execution' });
  } else if (roll < 0.9) {
    await setSessionState(ctx, sessionId, random() < 0.5 ? 'IDLE' : 'RUNNING');
    await announce('task_session.state_changed');
  } else {
    await announce('message.updated', { type: 'message' });
  }
}
