import type { ClarificationDeliveryPayload } from '../../contract/clarificationPayloads.js';
import type { KandevEvent } from '../../contract/kandevEvents.js';

/**
 * The ports the clarification service depends on. `bin/` and the worker wire them to NATS
 * (src/events/clarifications/natsClarificationDelivery.ts, src/events/natsEventPublisher.ts) and to the projector;
 * the service itself knows nothing of the bus.
 */

export type LiveDeliveryResult =
  /** The waiter replied `{ok: true}`: it durably received the response. */
  | { outcome: 'confirmed' }
  /** Nobody listens on the waiter subject: the session is detached. */
  | { outcome: 'no_waiter' }
  /** A waiter exists but did not confirm (timeout, error reply, transport failure). */
  | { outcome: 'unconfirmed'; reason: string };

export type ResumeResult = { accepted: true; duplicate: boolean } | { accepted: false; reason: string };

export interface ClarificationDelivery {
  /** Hands the response to the agent's live waiter and waits up to `timeoutMs` for its confirmation. */
  deliverToLiveWaiter(sessionId: string, payload: ClarificationDeliveryPayload, timeoutMs: number): Promise<LiveDeliveryResult>;
  /**
   * Publishes the resume command of a detached session; accepted only when the durable bus
   * acknowledged it within `deadlineMs`. Must be idempotent per (pending_id, claim_id).
   */
  publishResume(sessionId: string, payload: ClarificationDeliveryPayload, deadlineMs: number): Promise<ResumeResult>;
  /**
   * Whether a resume for `pendingId` was durably accepted (startup recovery: a crash between the
   * acknowledgement and finalisation must not reopen a question the agent already received).
   */
  wasResumeAccepted(sessionId: string, pendingId: string): Promise<boolean>;
}

/** Publishes Kandev events; resolves once the bus has them. */
export interface EventPublisher {
  publish(events: readonly KandevEvent[]): Promise<void>;
}

/**
 * Synchronously refreshes a task's summary by compare-and-set (the worker wires
 * `projector.reproject`). Rejects when the refresh did not commit, e.g. ConflictExhaustedError.
 */
export type RefreshSummary = (taskId: string) => Promise<void>;
