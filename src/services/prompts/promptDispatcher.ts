import type { Logger } from 'pino';
import { backoffDelayMs, type Backoff } from '../../background/backoff.js';
import { KeyedCoalescer } from '../../background/keyedCoalescer.js';
import type { Metrics } from '../../metrics.js';
import type { DrainResult, PromptDispatch } from './promptDispatch.js';
import { deliverHead, type DeliveryPassDeps } from './promptDeliveryPass.js';

/**
 * The prompt dispatcher: delivers each session's durable prompt receipts to its agent, at most
 * once, in order: direct prompts first, then the queue in FIFO order, one receipt of a session at a
 * time. A pass over a session's head is `deliverHead` (promptDeliveryPass.ts: its steps, in order);
 * this file decides when passes run: per session through the keyed coalescer (one pass of a session
 * at a time, once more when it was kicked during one, at most `maxConcurrentSessions` at once),
 * on kicks and on the worker's polls.
 */

export interface PromptDispatcherDeps extends Omit<DeliveryPassDeps, 'releaseBackoffMs'> {
  logger: Logger;
  /** Sessions whose heads this process delivers at once (PROMPT_DISPATCH_CONCURRENCY). */
  maxConcurrentSessions: number;
  /** Counts each reserved receipt's outcome, and gauges the sessions in delivery and waiting for a slot. */
  metrics?: Metrics;
}

export interface PromptDispatcher extends PromptDispatch {
  /** Starts taking kicks; before it (and after `stop`) a kick is ignored: the receipt waits for the poll. */
  start(): void;
  /** Kicks every session that has a due receipt; resolves once they were scheduled. */
  poll(): Promise<void>;
  /** Resolves once no pass runs or is scheduled. */
  whenIdle(): Promise<void>;
  /** Stops taking kicks and waits for the passes in flight. Idempotent. */
  stop(): Promise<void>;
}

/** Waits before a receipt whose delivery failed is tried again: 250 ms, doubling, at most 60 s. */
const RELEASE_BACKOFF: Backoff = { minTimeout: 250, factor: 2, maxTimeout: 60_000 };

/** Backoff of the next attempt after a failure of attempt number `attempts`: min(60 s, 250 ms · 2^attempts). */
export function releaseBackoffMs(attempts: number): number {
  return backoffDelayMs(RELEASE_BACKOFF, attempts);
}

const POLL_PAGE = 500;

/** The next turn of the event loop. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export function createPromptDispatcher(deps: PromptDispatcherDeps): PromptDispatcher {
  const { store } = deps;
  const log = deps.logger.child({ component: 'prompt-dispatcher' });
  const passDeps: DeliveryPassDeps = { ...deps, releaseBackoffMs };
  let accepting = false;
  /** Drains asked for, by session: the next pass of the session is theirs (a paused head included). */
  const drains = new Map<string, Array<(result: DrainResult) => void>>();
  const settleDrains = (sessionId: string, result: DrainResult) => {
    const waiting = drains.get(sessionId) ?? [];
    drains.delete(sessionId);
    for (const resolve of waiting) resolve(result);
  };

  const passes = new KeyedCoalescer<string>({
    concurrency: deps.maxConcurrentSessions,
    run: async ([sessionId]) => {
      // A kick from admission arrives while its endpoint is still replying: the pass starts on the
      // next turn of the event loop, after that reply went out. On SQLite every statement runs
      // synchronously on this thread, so a pass started at once would hold the reply back by its
      // first statements.
      await nextTurn();
      if (!accepting) return settleDrains(sessionId!, { outcome: 'nothing', refused: 'stopping' });
      // Taken now: a drain asked for while this pass runs gets the next one.
      const waiting = drains.get(sessionId!);
      drains.delete(sessionId!);
      const result: DrainResult = { outcome: 'nothing' };
      try {
        const options = waiting
          ? { drain: true, onReserved: (id: string) => (result.receiptId = id), onRefused: (reason: string) => (result.refused = reason) }
          : {};
        result.outcome = await deliverHead(passDeps, log, sessionId!, options);
        if (result.outcome !== 'nothing') deps.metrics?.promptDeliveryAttempts.inc({ outcome: result.outcome });
      } catch (err) {
        result.outcome = 'failed';
        log.error({ sessionId, err }, 'prompt dispatch pass failed');
      }
      for (const resolve of waiting ?? []) resolve(result);
    },
    onCounts: ({ inFlight, waiting }) => {
      deps.metrics?.dispatcherSessions.set({ state: 'delivering' }, inFlight);
      deps.metrics?.dispatcherSessions.set({ state: 'waiting' }, waiting);
    },
  });
  deps.metrics?.dispatcherSessions.set({ state: 'delivering' }, 0);
  deps.metrics?.dispatcherSessions.set({ state: 'waiting' }, 0);

  return {
    kick(sessionId) {
      if (!accepting || !store.available) return;
      passes.mark(sessionId);
    },
    drain(sessionId) {
      if (!accepting || !store.available) return Promise.resolve({ outcome: 'nothing', refused: 'stopping' });
      return new Promise<DrainResult>((resolve) => {
        drains.set(sessionId, [...(drains.get(sessionId) ?? []), resolve]);
        passes.mark(sessionId);
      });
    },
    start() {
      accepting = true;
    },
    async poll() {
      if (!accepting) return;
      // Every page, so no set of sessions can starve the rest; a kick beyond the concurrency waits its turn.
      let after: string | undefined;
      for (;;) {
        const page = await store.listDispatchableSessions(POLL_PAGE, after);
        for (const sessionId of page) if (accepting) passes.mark(sessionId);
        if (page.length < POLL_PAGE || !accepting) break;
        after = page[page.length - 1];
      }
    },
    whenIdle: () => passes.whenIdle(),
    async stop() {
      accepting = false;
      await passes.stop();
      for (const sessionId of [...drains.keys()]) settleDrains(sessionId, { outcome: 'nothing', refused: 'stopping' });
    },
  };
}
