import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Topology } from '../../src/contract/subjects.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { setSessionState } from '../../src/repository/tasks/tasks.js';
import { startFakeAgent, type FakeAgent } from '../../test/support/fakeAgent.js';
import type { BackendEvents } from './backendEvents.js';
import type { SeededRandom } from './seededRandom.js';

/**
 * The agents' side of the soak.
 *
 * - Live waiters (test/support/fakeAgent.ts) on the sessions that have one: each confirms every
 *   clarification delivery at once; the other sessions are detached, so their answers go to the
 *   resume stream, read at the end.
 * - One prompt agent: a core subscription on every session's prompt subject, so it sees each
 *   publish of a prompt (a second publish of one receipt included, which the stream's dedupe
 *   window would hide), recorded by receipt id. It then does what Kandev does when an agent
 *   finishes its turn: sets the session IDLE and announces it, which lets the dispatcher send the
 *   session's next prompt.
 */
export interface SoakAgents {
  /** Adds a live waiter on the session. */
  wait(sessionId: string): void;
  /** Clarification deliveries the live waiters confirmed, by pending id. */
  liveDeliveries(): Map<string, number>;
  /** Prompt publishes seen on the bus, by receipt id. */
  readonly promptsSeen: Map<string, number>;
  stop(): void;
}

export function startSoakAgents(nc: NatsConnection, topology: Topology, ctx: RepositoryContext, events: BackendEvents, random: SeededRandom): SoakAgents {
  const waiters: FakeAgent[] = [];
  const promptsSeen = new Map<string, number>();
  const sub: Subscription = nc.subscribe(`${topology.prefix}agent.*.prompt`);
  void (async () => {
    for await (const m of sub) {
      // A worker's start probe publishes an empty message on a probe session's subject: not a prompt.
      const receiptId = m.headers?.get('Pending-Projector-Receipt-Id');
      if (!receiptId) continue;
      promptsSeen.set(receiptId, (promptsSeen.get(receiptId) ?? 0) + 1);
      const { session_id: sessionId, task_id: taskId } = (m.json() as { data: { session_id: string; task_id: string } }).data;
      const turnMs = random.int(50, 400);
      setTimeout(() => void finishTurn(ctx, events, taskId, sessionId), turnMs);
    }
  })();
  return {
    wait: (sessionId) => void waiters.push(startFakeAgent(nc, topology.prefix, sessionId)),
    liveDeliveries() {
      const byPending = new Map<string, number>();
      for (const w of waiters) for (const d of w.deliveries) byPending.set(d.pending_id, (byPending.get(d.pending_id) ?? 0) + 1);
      return byPending;
    },
    promptsSeen,
    stop() {
      sub.unsubscribe();
      for (const w of waiters) w.stop();
    },
  };
}

/** The agent's turn ended: the session is IDLE again, announced as Kandev announces it. Best effort: a failure leaves the nudge at quiescence to do it. */
export async function finishTurn(ctx: RepositoryContext, events: BackendEvents, taskId: string, sessionId: string): Promise<void> {
  try {
    const changed = await ctx.knex('task_sessions').where({ id: sessionId, state: 'RUNNING' }).first();
    if (!changed) return;
    await setSessionState(ctx, sessionId, 'IDLE');
    await events.announce('task_session.state_changed', { task_id: taskId, session_id: sessionId, old_state: 'RUNNING', new_state: 'IDLE' });
  } catch {
    // the quiescence nudge covers it
  }
}
