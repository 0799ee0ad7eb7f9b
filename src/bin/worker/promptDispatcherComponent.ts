import type { Logger } from 'pino';
import { periodic } from '../../background/periodic.js';
import type { PromptDispatcher } from '../../services/prompts/promptDispatcher.js';
import type { PromptReconcileReport } from '../../services/prompts/reconcilePromptReceipts.js';
import type { WorkerComponent } from './component.js';

export interface PromptDispatcherComponentDeps {
  dispatcher: PromptDispatcher;
  /** One reconciliation pass; returns the sessions it handed to the dispatcher. */
  reconcile(options?: { initial?: boolean }): Promise<{ report: PromptReconcileReport; sessions: string[] }>;
  /** Between reconciliation passes: RESERVATION_TTL_MS, the longest a dead owner's receipt can look alive. */
  reconcileEveryMs: number;
  /** Between polls for due receipts (DISPATCH_POLL_MS), the safety net under the kicks. */
  pollEveryMs: number;
  logger: Logger;
}

/**
 * The prompt dispatcher as a worker component. Its start reconciles the receipts a crashed process
 * left (before the endpoints start: the component sits before them), then takes kicks and polls
 * every DISPATCH_POLL_MS, and reconciles again every RESERVATION_TTL_MS. Its stop ends both loops
 * and drains the passes in flight; the endpoints that kick it have stopped before (reverse order).
 */
export function promptDispatcherComponent(deps: PromptDispatcherComponentDeps): WorkerComponent {
  const logger = deps.logger.child({ component: 'prompt-dispatcher' });
  // A failed first pass does not keep the worker from starting: the next one tries again.
  const reconciliation = periodic({
    intervalMs: deps.reconcileEveryMs,
    firstRun: 'at-start',
    logger,
    failureMessage: 'prompt receipt reconciliation failed',
    run: async ({ first }) => {
      const { sessions } = await deps.reconcile({ initial: first });
      for (const sessionId of sessions) deps.dispatcher.kick(sessionId);
    },
  });
  const polls = periodic({
    intervalMs: deps.pollEveryMs,
    firstRun: 'after-interval',
    logger,
    failureMessage: 'prompt dispatch poll failed',
    run: () => deps.dispatcher.poll(),
  });

  return {
    name: 'prompt-dispatcher',
    async start() {
      deps.dispatcher.start();
      await reconciliation.start();
      await polls.start();
    },
    async stop() {
      await Promise.all([polls.stop(), reconciliation.stop()]);
      await deps.dispatcher.stop();
    },
  };
}
