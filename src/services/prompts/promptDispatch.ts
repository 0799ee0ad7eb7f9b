/**
 * The prompt dispatcher as admission sees it: after a prompt receipt committed (a direct send, or
 * a queue row), admission kicks the session so this replica delivers it now rather than at its
 * next poll. A kick is a hint only: the receipt is durable, and every replica's poll and startup
 * reconciliation find it without one.
 */
export interface PromptDispatch {
  /** Schedules delivery of the session's head receipt; never throws, never waits. */
  kick(sessionId: string): void;
}

/** No dispatcher (one-shot commands, tests of admission alone): receipts wait for a worker. */
export const NO_PROMPT_DISPATCH: PromptDispatch = {
  kick: () => undefined,
};
