import type { Logger } from 'pino';
import type { KandevEvent } from '../../contract/kandevEvents.js';
import type { PromptReceiptStore } from '../../repository/prompts/promptReceiptStore.js';
import type { AgentPromptDelivery } from './agentPromptDelivery.js';
import type { EventPublisher, RefreshSummary } from '../clarifications/clarificationPorts.js';
import { queueStatusChanged, reservedTurnStarted, transcriptLabelled } from './promptEvents.js';
import { publishOrRefresh } from '../publishOrRefresh.js';

export interface PromptReconcileDeps {
  store: PromptReceiptStore;
  delivery: AgentPromptDelivery;
  events: EventPublisher;
  refreshSummary: RefreshSummary;
  logger: Logger;
  /** The queue limit, the `max` of `message.queue.status_changed`. */
  queueMax: number;
}

export interface PromptReconcileReport {
  /** Unattempted, and unreserved or a dead owner's: handed to the dispatcher (an expired token cleared). */
  resumed: number;
  /** Attempted by a dead owner, the stream holds the prompt: removed, labelled acknowledged. */
  removed_acknowledged: number;
  /** Attempted by a dead owner, the stream does not hold it: removed without dispatch, labelled unconfirmed. */
  removed_unconfirmed: number;
  /** A live owner's, or the stream could not be asked: left for the next pass. */
  deferred: number;
  /** The task is gone: deleted. */
  orphaned: number;
  failed: number;
}

/**
 * Reconciliation of durable prompt receipts, at worker start before the endpoints serve and
 * then every RESERVATION_TTL_MS (always: a replica can die at any time). Resumes what never reached
 * the marker, and removes without dispatch what did: after the marker the prompt may be with the
 * agent, so it is never sent again, even when the stream lacks it (an explicit resend by the user
 * is a new caller id). The first pass (`initial`) always logs its counts, later ones only when they
 * changed something. This is the opposite of clarification recovery, which restores a claim
 * whose resume the stream lacks: a claim stays restorable until its acceptance, a prompt's marker
 * is written before its I/O. Returns the sessions to kick.
 */
export async function reconcilePromptReceipts(
  deps: PromptReconcileDeps,
  options: { initial?: boolean } = {},
): Promise<{ report: PromptReconcileReport; sessions: string[] }> {
  const log = deps.logger.child({ component: 'prompt-reconciliation' });
  const report: PromptReconcileReport = { resumed: 0, removed_acknowledged: 0, removed_unconfirmed: 0, deferred: 0, orphaned: 0, failed: 0 };
  const sessions = new Set<string>();
  const changed = new Map<string, { taskId: string; sessionId: string; receiptId: string }>();
  const { store } = deps;
  for (const { receipt, action } of await store.listReconcilable()) {
    try {
      if (action === 'defer') {
        report.deferred++;
      } else if (action === 'orphan') {
        if (await store.removeOrphan(receipt.id)) report.orphaned++;
      } else if (action === 'resume') {
        if (receipt.reservationToken !== null && (await store.clearExpiredReservation(receipt.id, receipt.reservationToken))) {
          changed.set(receipt.sessionId, { taskId: receipt.taskId, sessionId: receipt.sessionId, receiptId: receipt.id });
        }
        sessions.add(receipt.sessionId);
        report.resumed++;
      } else {
        let stored: boolean;
        try {
          stored = await deps.delivery.wasPromptStored(receipt.sessionId, receipt.id);
        } catch (err) {
          // Only the label depends on it, but a wrong `unconfirmed` would tell the user to resend a
          // prompt the agent has: ask again next pass.
          log.warn({ receiptId: receipt.id, err }, 'could not ask the prompt stream about an attempted receipt; deferring');
          report.deferred++;
          continue;
        }
        const label = stored ? 'acknowledged' : 'unconfirmed';
        const removed = await store.removeAttempted(receipt.id, label);
        if (!removed) {
          report.deferred++;
          continue;
        }
        const events: KandevEvent[] = [];
        if (removed.message) events.push(...transcriptLabelled(removed.message, label));
        if (stored && removed.message && receipt.transcriptTurnId !== null) events.push(reservedTurnStarted(removed.message, { id: receipt.transcriptTurnId }));
        if (events.length > 0) await publishOrRefresh(deps, log, receipt.taskId, events);
        changed.set(receipt.sessionId, { taskId: receipt.taskId, sessionId: receipt.sessionId, receiptId: receipt.id });
        sessions.add(receipt.sessionId);
        if (stored) report.removed_acknowledged++;
        else report.removed_unconfirmed++;
      }
    } catch (err) {
      log.error({ receiptId: receipt.id, err }, 'could not reconcile a prompt receipt');
      report.failed++;
    }
  }
  for (const session of changed.values()) {
    const status = await store.queueStatus(session.sessionId).catch(() => undefined);
    if (status !== undefined)
      await publishOrRefresh(deps, log, session.taskId, [queueStatusChanged(session, status, deps.queueMax, `${session.receiptId}:reconciled`)]);
  }
  // Every RESERVATION_TTL_MS: a pass that changed nothing (receipts merely waiting for a busy
  // session are handed over again each time) is not news.
  const quiet = !options.initial && changed.size === 0 && report.orphaned === 0 && report.failed === 0;
  log[quiet ? 'debug' : 'info'](report, 'prompt receipt reconciliation finished');
  return { report, sessions: [...sessions] };
}
