import type { Logger } from 'pino';
import { coerceError } from '../errors.js';
import type { KandevEvent } from '../contract/kandevEvents.js';
import type { EventPublisher, RefreshSummary } from './clarifications/clarificationPorts.js';

/**
 * How a service's committed write reaches the task summary. The summary reprojects from the events
 * the worker's own stream captures, so the events are published; but the write is already committed,
 * and if the bus refuses the events nothing would trigger that reprojection: the summary is then
 * refreshed directly, so it converges anyway. Neither failure undoes the write, so neither fails the
 * caller; both are logged here, once.
 */
export interface SummaryPorts {
  events: EventPublisher;
  refreshSummary: RefreshSummary;
}

/** Publishes `events` (about `taskId`); if the bus refuses them, refreshes the summary directly. */
export async function publishOrRefresh(ports: SummaryPorts, log: Logger, taskId: string, events: readonly KandevEvent[]): Promise<void> {
  if (events.length === 0) return;
  try {
    await ports.events.publish(events);
    return;
  } catch (err) {
    log.warn({ taskId, err }, 'could not publish the events of a committed write; refreshing the summary directly');
  }
  try {
    await ports.refreshSummary(taskId);
  } catch (err) {
    log.error({ taskId, err }, 'the summary refresh failed too; the next event or reconcile of the task repairs it');
  }
}

export type RefreshOutcome = { refreshed: true } | { refreshed: false; error: Error };

/**
 * For a caller that must know the summary shows its write before it replies (a restored claim is
 * acknowledged `retryable` only once the question is visible again): refreshes the summary FIRST,
 * synchronously, then publishes the events whatever the refresh did, for every other subscriber
 * (and, when the refresh did not commit, so the projector still reprojects from them). A refused
 * publish is logged; the refresh outcome is the caller's to act on.
 */
export async function refreshThenPublish(ports: SummaryPorts, log: Logger, taskId: string, events: readonly KandevEvent[]): Promise<RefreshOutcome> {
  let outcome: RefreshOutcome = { refreshed: true };
  try {
    await ports.refreshSummary(taskId);
  } catch (err) {
    outcome = { refreshed: false, error: coerceError(err) };
  }
  if (events.length > 0) {
    await ports.events.publish(events).catch((err: unknown) => log.warn({ taskId, err }, 'could not publish the events of a committed write'));
  }
  return outcome;
}
