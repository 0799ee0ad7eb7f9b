import type { Logger } from 'pino';
import type { ClarificationStore } from '../../repository/clarifications/clarificationStore.js';
import type { MessageRecord } from '../../repository/rowMapping.js';
import { timestampToMicros } from '../../timestamps.js';
import { isTruthyFlag } from '../../turns/lifecycleTurn.js';
import type { ClarificationDelivery, EventPublisher, RefreshSummary } from './clarificationPorts.js';
import { messageUpdatedEvents } from '../messageUpdatedEvents.js';
import { publishOrRefresh } from '../publishOrRefresh.js';

export interface RecoveryDeps {
  store: ClarificationStore;
  delivery: ClarificationDelivery;
  events: EventPublisher;
  refreshSummary: RefreshSummary;
  logger: Logger;
}

export interface RecoveryOptions {
  /**
   * Claims younger than this are left alone: another replica may still be delivering them. Set it
   * above the longest claim-to-finalise time (the respond deadline plus a margin).
   */
  minClaimAgeMs: number;
}

export interface RecoveryReport {
  /** Back to pending: their turn is still current and the session non-terminal. */
  restored: number;
  /** The bus holds their resume command: finalised as delivered. */
  finalized: number;
  /** No longer restorable (newer turn or terminal session): marker cleared, terminal status kept. */
  abandoned: number;
  /** Too young to judge yet. */
  deferred: number;
  failed: number;
}

/**
 * Startup recovery of claims left `response_delivery_pending` by a crash between claim and delivery
 * (ADR 0001), one bundle at a time. Every changed row is published as
 * `message.updated`, so the summary reprojects like after any other write.
 */
export async function recoverPendingDeliveries(deps: RecoveryDeps, options: RecoveryOptions): Promise<RecoveryReport> {
  const log = deps.logger.child({ component: 'clarification-recovery' });
  const report: RecoveryReport = { restored: 0, finalized: 0, abandoned: 0, deferred: 0, failed: 0 };
  const { store } = deps;
  const publish = async (rows: MessageRecord[]) => {
    if (rows.length > 0) await publishOrRefresh(deps, log, rows[0]!.taskId, messageUpdatedEvents(rows));
  };
  for (const pendingId of await store.listPendingDeliveries()) {
    try {
      const rows = (await store.findMessagesByPendingId(pendingId)).filter(
        (r) => r.type === 'clarification_request' && isTruthyFlag(r.metadata.response_delivery_pending),
      );
      if (rows.length === 0) continue;
      const now = timestampToMicros(store.now());
      const youngest = Math.max(...rows.map((r) => timestampToMicros(r.updatedAt)));
      if (now - youngest < options.minClaimAgeMs * 1000) {
        report.deferred++;
        continue;
      }
      const statuses = new Set(rows.map((r) => r.metadata.status));
      const [status] = [...statuses];
      if (statuses.size !== 1 || (status !== 'answered' && status !== 'rejected')) {
        log.error({ pendingId, statuses: [...statuses] }, 'claimed rows disagree on their status; left for an operator');
        report.failed++;
        continue;
      }
      const ids = rows.map((r) => r.id);
      if (status === 'answered') {
        let accepted: boolean;
        try {
          accepted = await deps.delivery.wasResumeAccepted(rows[0]!.sessionId, pendingId);
        } catch (err) {
          // Unknown is not "no": restoring a claim whose resume the bus may hold could deliver the
          // answer twice. Leave it for the next pass.
          log.warn({ pendingId, err }, 'could not tell whether the resume was accepted; deferring');
          report.deferred++;
          continue;
        }
        if (accepted) {
          await publish(await store.finalizeClarificationDelivery(ids));
          report.finalized++;
          continue;
        }
      }
      const restore = await store.restoreClaimedClarifications(pendingId, status, ids);
      if (restore.restored) {
        await publish(restore.rows);
        report.restored++;
      } else {
        await publish(await store.abandonClaimedClarifications(ids));
        report.abandoned++;
      }
    } catch (err) {
      log.error({ pendingId, err }, 'could not recover a clarification claim');
      report.failed++;
    }
  }
  log.info(report, 'clarification delivery recovery finished');
  return report;
}
