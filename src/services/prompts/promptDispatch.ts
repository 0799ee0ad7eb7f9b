/**
 * The prompt dispatcher as admission sees it: after a prompt receipt committed (a direct send, or
 * a queue row), admission kicks the session so this replica delivers it now rather than at its
 * next poll. A kick is a hint only: the receipt is durable, and every replica's poll and startup
 * reconciliation find it without one.
 */
export interface PromptDispatch {
  /** Schedules delivery of the session's head receipt; never throws, never waits. */
  kick(sessionId: string): void;
  /**
   * One pass over the session's head now, a paused queue's included (`queue.drain`); resolves with
   * what it did. Never rejects: a failed pass is the outcome `failed`.
   */
  drain(sessionId: string): Promise<DrainResult>;
}

export interface DrainResult {
  /** `nothing`: no receipt was reserved (see `refused`); otherwise the delivery pass's outcome. */
  outcome: 'nothing' | 'acknowledged' | 'unconfirmed' | 'released' | 'failed' | 'abandoned' | 'lost';
  /** The receipt the pass reserved. */
  receiptId?: string;
  /** Why the head was not eligible (`session_unavailable`, `live_clarification`, ...), or `stopping`. */
  refused?: string;
}

/** No dispatcher (one-shot commands, tests of admission alone): receipts wait for a worker. */
export const NO_PROMPT_DISPATCH: PromptDispatch = {
  kick: () => undefined,
  drain: () => Promise.resolve({ outcome: 'nothing', refused: 'no_dispatcher' }),
};
