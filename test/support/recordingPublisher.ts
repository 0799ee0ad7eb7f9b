import type { PublishOutcome, SessionPendingActionUpdate, SummaryPublisher, SummaryUpdate } from '../../src/projectors/ports.js';

/** Our publisher port with no bus behind it, recording what projections hand to it. */
export class RecordingPublisher implements SummaryPublisher {
  summaries: SummaryUpdate[] = [];
  sessions: SessionPendingActionUpdate[] = [];

  async publishSummary(update: SummaryUpdate): Promise<PublishOutcome> {
    this.summaries.push(update);
    return 'published';
  }

  async publishSessionPendingActions(updates: readonly SessionPendingActionUpdate[]) {
    this.sessions.push(...updates);
  }
}
