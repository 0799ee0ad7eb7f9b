import type { Logger } from 'pino';
import type { PromptDispatcher } from '../../services/promptDispatcher.js';
import type { PromptReconcileReport } from '../../services/reconcilePromptReceipts.js';
import type { WorkerComponent } from './component.js';

export interface PromptDispatcherComponentDeps {
  dispatcher: PromptDispatcher;
  /** One reconciliation pass (R33); returns the sessions it handed to the dispatcher. */
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
 * every DISPATCH_POLL_MS, and reconciles again every RESERVATION_TTL_MS. Its stop ends both timers
 * and drains the passes in flight; the endpoints that kick it have stopped before (reverse order).
 */
export function promptDispatcherComponent(deps: PromptDispatcherComponentDeps): WorkerComponent {
  const log = deps.logger.child({ component: 'prompt-dispatcher' });
  let stopped = false;
  let pollTimer: NodeJS.Timeout | undefined;
  let reconcileTimer: NodeJS.Timeout | undefined;
  const passes = new Set<Promise<unknown>>();

  const reconcile = async (initial = false) => {
    const { sessions } = await deps.reconcile({ initial });
    for (const sessionId of sessions) deps.dispatcher.kick(sessionId);
  };
  const every = (ms: number, what: string, run: () => Promise<void>, set: (t: NodeJS.Timeout) => void) => {
    const tick = () => {
      if (stopped) return;
      const pass = run()
        .catch((err: unknown) => log.error({ err }, `${what} failed`))
        .finally(() => {
          passes.delete(pass);
          if (stopped) return;
          const timer = setTimeout(tick, ms);
          timer.unref();
          set(timer);
        });
      passes.add(pass);
    };
    const timer = setTimeout(tick, ms);
    timer.unref();
    set(timer);
  };

  return {
    name: 'prompt-dispatcher',
    async start() {
      deps.dispatcher.start();
      // A failed first pass does not keep the worker from starting: the timer tries again.
      await reconcile(true).catch((err: unknown) => log.error({ err }, 'prompt receipt reconciliation failed'));
      every(deps.pollEveryMs, 'prompt dispatch poll', () => deps.dispatcher.poll(), (t) => (pollTimer = t));
      every(deps.reconcileEveryMs, 'prompt receipt reconciliation', () => reconcile(), (t) => (reconcileTimer = t));
    },
    async stop() {
      stopped = true;
      clearTimeout(pollTimer);
      clearTimeout(reconcileTimer);
      await Promise.all([...passes]);
      await deps.dispatcher.stop();
    },
  };
}
