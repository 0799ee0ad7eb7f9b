/**
 * The turn-start hook: optional work that must happen before a prompt is persisted (Kandev's
 * turn-start hooks), called by message admission INSIDE the task's admission lease, after the
 * preflight and before the accepting transaction. Whatever it does, the comments the preflight
 * validated cannot change meanwhile, and tests can hold the lease open by holding the hook.
 *
 * `bin/` wires NO_TURN_START_HOOK unless TURN_START_HOOK_SUBJECT is set, and then the request/reply
 * adapter src/events/prompts/natsTurnStartHook.ts.
 */

/** What the hook is told about the prompt about to be admitted. */
export interface TurnStartRequest {
  task_id: string;
  session_id: string;
  caller_id: string;
  /** `direct` under the admission lease; `queued` when a dispatcher runs it for a queue row. */
  delivery_kind: 'direct' | 'queued';
}

/**
 * `ok: true` lets admission go on. Every failure is an expected outcome that admission replies as
 * `unavailable` (nothing was accepted, so the same request may be sent again):
 * - `timeout`: no reply within the hook timeout;
 * - `no_responders`: a hook is configured but nobody serves its subject;
 * - `rejected`: a reply other than `{"ok": true}` (an error reply, another value, invalid JSON);
 * - `transport`: the request could not be made (connection closed, ...).
 */
export type TurnStartResult = { ok: true } | { ok: false; reason: 'timeout' | 'no_responders' | 'rejected' | 'transport'; detail: string };

export interface TurnStartHook {
  beforePrompt(request: TurnStartRequest): Promise<TurnStartResult>;
}

/** No hook configured: admission goes on at once, with no call. */
export const NO_TURN_START_HOOK: TurnStartHook = {
  beforePrompt: () => Promise.resolve({ ok: true }),
};
