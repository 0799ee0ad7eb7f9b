import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Topology } from '../../src/contract/subjects.js';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import type { BackendEvents } from './backendEvents.js';
import type { RevisionMonitor } from './revisionMonitor.js';
import { finishTurn } from './soakAgents.js';
import type { SoakLedger } from './soakLedger.js';

const QUIET_MS = 3000;

/**
 * Waits, at most `timeoutMs`, until nothing is left to do: the workers' consumer has nothing pending
 * or unacknowledged, no prompt receipt waits or is reserved, no clarification claim is still being
 * delivered, and no summary was published for a few seconds. Meanwhile it ends the agents' turns
 * (RUNNING sessions go IDLE), so every queued prompt gets its turn, including those whose publish
 * the prompt agent missed while the bus restarted, and answers the questions queued prompts wait
 * behind (a queued prompt is not delivered while a question is live on its session's turn). Resolves to undefined once quiet, or to what
 * still was not.
 */
export async function waitForQuiescence(deps: {
  ctx: RepositoryContext;
  nc: NatsConnection;
  topology: Topology;
  events: BackendEvents;
  monitor: RevisionMonitor;
  ledger: SoakLedger;
  /** What a user does about a session whose queued prompts wait behind a question: answers it. */
  answerPending: (sessionId: string) => Promise<void>;
  timeoutMs: number;
}): Promise<string | undefined> {
  const { ctx, topology } = deps;
  await deps.events.flush();
  const deadline = Date.now() + deps.timeoutMs;
  let lastNudge = 0;
  let state = '';
  while (Date.now() < deadline) {
    if (Date.now() - lastNudge > 2000) {
      lastNudge = Date.now();
      for (const task of deps.ledger.liveTasks()) for (const s of task.sessions) await finishTurn(ctx, deps.events, task.taskId, s.id);
      const blocked = await rawRows<{ session_id: string }>(ctx, `SELECT DISTINCT session_id FROM queued_messages`).catch(() => []);
      for (const { session_id } of blocked) await deps.answerPending(session_id).catch(() => undefined);
    }
    try {
      const jsm = await jetstreamManager(deps.nc);
      const consumer = await jsm.consumers.info(topology.eventsStream, topology.consumer);
      const [receipts] = await rawRows<{ n: number | string }>(ctx, `SELECT COUNT(*) AS n FROM queued_messages`);
      const [claims] = await rawRows<{ n: number | string }>(
        ctx,
        `SELECT COUNT(*) AS n FROM task_session_messages WHERE type = 'clarification_request' AND ${ctx.dialect.jsonTrue('metadata', 'response_delivery_pending')}`,
      );
      const quietForMs = Date.now() - deps.monitor.lastArrivalMs();
      state = `${consumer.num_pending} pending and ${consumer.num_ack_pending} unacknowledged events, ${receipts!.n} prompt receipts, ${claims!.n} claims in delivery, last summary ${quietForMs} ms ago`;
      if (consumer.num_pending === 0 && consumer.num_ack_pending === 0 && Number(receipts!.n) === 0 && Number(claims!.n) === 0 && quietForMs > QUIET_MS)
        return undefined;
    } catch (err) {
      state = `not readable yet: ${(err as Error).message}`;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return state;
}
