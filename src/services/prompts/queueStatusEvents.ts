import type { Logger } from 'pino';
import type { QueueStatus } from '../../repository/prompts/queueStatus.js';
import { publishOrRefresh, type SummaryPorts } from '../publishOrRefresh.js';
import { queueStatusChanged } from './promptEvents.js';

export interface QueueStatusEvents {
  /**
   * Reads the session's queue and publishes `message.queue.status_changed` for the change `step`,
   * after the caller's reply: the event carries every waiting entry (Kandev's shape), and reading
   * and publishing it is no part of the change. One session's events go out in the order issued,
   * each reading the queue when its turn comes, so the last one tells the queue as it is.
   */
  issue(session: { sessionId: string; taskId: string }, step: string): void;
  /** Resolves once every event issued so far went out (or failed, logged); the worker waits for it on stop. */
  settled(): Promise<void>;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export function createQueueStatusEvents(deps: {
  ports: SummaryPorts;
  read(sessionId: string): Promise<QueueStatus>;
  queueMax: number;
  logger: Logger;
}): QueueStatusEvents {
  const log = deps.logger.child({ component: 'queue-status-events' });
  const chains = new Map<string, Promise<void>>();
  return {
    issue(session, step) {
      // On the next turn of the event loop at the earliest: on SQLite the queue's read runs
      // synchronously on this thread, and started at once it would hold back the reply it follows.
      const previous = chains.get(session.sessionId) ?? nextTurn();
      const next = previous.then(async () => {
        try {
          const status = await deps.read(session.sessionId);
          await publishOrRefresh(deps.ports, log, session.taskId, [queueStatusChanged(session, status, deps.queueMax, step)]);
        } catch (err) {
          log.warn({ ...session, step, err }, 'could not read the queue for its status event; the next change or reconcile tells it');
        }
      });
      chains.set(session.sessionId, next);
      void next.then(() => {
        if (chains.get(session.sessionId) === next) chains.delete(session.sessionId);
      });
    },
    async settled() {
      while (chains.size > 0) await Promise.all([...chains.values()]);
    },
  };
}
