/**
 * Failpoints (gofail style): named boundaries in the prompt path and the queue's edits where an
 * end-to-end test stops a worker process for good, to `kill -9` it exactly there. This is only the port: the production
 * worker always runs with NO_FAILPOINTS, and no setting or flag can arm one; the crash tests start
 * their workers through a test-only entry (test/support/failpointWorker.ts) that passes armed ones.
 */

/**
 * The boundaries of a prompt's delivery, in order (test/e2e/promptDeliveryCrashes.test.ts kills the
 * worker at each one and checks no prompt is delivered twice), then the last step inside the
 * transaction of a `queue.remove`/`queue.clear` and of a `queue.reorder`, every write done and the
 * COMMIT not yet sent (test/e2e/queueEditCrashes.test.ts checks a kill there leaves the old queue whole).
 */
export const FAILPOINT_NAMES = [
  'after_accept_commit',
  'after_reserve',
  'after_transcript',
  'after_marker_commit',
  'after_publish',
  'before_withdrawal_commit',
  'before_reorder_commit',
] as const;
type FailpointName = (typeof FAILPOINT_NAMES)[number];

export interface Failpoints {
  /** Resolves at once unless `name` is armed; an armed one may never resolve. */
  reach(name: FailpointName): Promise<void>;
}

/** What every worker but a crash test's runs with: each `reach` resolves at once and costs nothing. */
export const NO_FAILPOINTS: Failpoints = { reach: () => Promise.resolve() };
