import type { PublishedSummary } from '../contract/publishedSummary.js';
import type { PendingAction } from '../turns/pendingAction.js';

/** A full summary replacement, as published on `task.status_summary.updated`. */
export interface SummaryUpdate {
  taskId: string;
  workspaceId: string;
  summary: PublishedSummary;
}

interface PendingActionRevision {
  epoch: string;
  sequence: number;
}

export interface SessionPendingActionUpdate {
  sessionId: string;
  taskId: string;
  /** Kandev's web client drops a `session.pending_action_changed` without it. */
  workspaceId: string;
  pendingAction: PendingAction | null;
  revision: PendingActionRevision;
}

/**
 * `published`: the bus durably has the update. `duplicate`: it already held this (task, revision),
 * from an earlier attempt whose transaction did not commit (its payload may differ), and took nothing
 * now; the caller must publish the summary at a new revision.
 */
export type PublishOutcome = 'published' | 'duplicate';

/**
 * Where projections go. Implemented over NATS in src/events/natsSummaryPublisher.ts; the projector
 * knows nothing of the bus. `publishSummary` resolves only once the bus durably has the update, and
 * must dedupe on (task, revision), telling a duplicate apart, so a retried publish is harmless.
 */
export interface SummaryPublisher {
  publishSummary(update: SummaryUpdate): Promise<PublishOutcome>;
  publishSessionPendingActions(updates: readonly SessionPendingActionUpdate[]): Promise<void>;
}
