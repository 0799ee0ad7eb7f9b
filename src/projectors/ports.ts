import type { PublishedSummary } from '../events/statusSummary.js';
import type { PendingAction } from '../turns/pendingAction.js';

/** A full summary replacement, as published on `task.status_summary.updated`. */
export interface SummaryUpdate {
  taskId: string;
  workspaceId: string;
  summary: PublishedSummary;
}

export interface PendingActionRevision {
  epoch: string;
  sequence: number;
}

export interface SessionPendingActionUpdate {
  sessionId: string;
  taskId: string;
  pendingAction: PendingAction | null;
  revision: PendingActionRevision;
}

/**
 * Where projections go. Implemented over NATS in src/events/natsSummaryPublisher.ts; the projector
 * knows nothing of the bus. `publishSummary` resolves only once the bus durably has the update, and
 * must dedupe on (task, revision) so a retried publish is harmless.
 */
export interface SummaryPublisher {
  publishSummary(update: SummaryUpdate): Promise<void>;
  publishSessionPendingActions(updates: readonly SessionPendingActionUpdate[]): Promise<void>;
}
