import type { CanonicalTimestamp } from '../../timestamps.js';
import { abandonClaimedClarifications } from './abandonClaimedClarifications.js';
import {
  ClaimIntegrityError,
  claimClarificationBundle,
  finalizeClarificationDelivery,
  listPendingDeliveries,
  restoreClaimedClarifications,
  type ClaimOutcome,
  type ClaimResult,
  type RestoreResult,
  type TerminalOutcome,
} from './clarificationClaims.js';
import {
  detachActiveClarifications,
  expireActiveClarificationBundle,
  findActiveClarificationMessages,
  findMessagesByPendingId,
  InvalidCursorError,
  listUnresolvedClarificationBundles,
  type BundlePage,
  type ListBundlesOptions,
} from './clarifications.js';
import type { RepositoryContext } from '../context.js';
import { loadTaskPendingState, type TaskPendingState } from '../projection/pendingActions.js';
import type { MessageRecord, SessionRecord, TurnRecord } from '../rowMapping.js';
import { getSession } from '../tasks/tasks.js';
import { getCurrentTurn, listVisibleTurns } from '../turns/turns.js';

/**
 * A claim as the clarification service sees it: taken, not claimable (no write), or refused because
 * the bundle's rows broke an invariant while it was being claimed (rolled back; nothing written).
 */
type BundleClaim = ClaimResult | { claimed: false; reason: 'CLAIM_INTEGRITY'; message: string };

/** A page of unresolved bundles, or why the request cannot be paged (a cursor this store never issued, a bad instant). */
type BundleListing = { ok: true; page: BundlePage } | { ok: false; reason: 'BAD_REQUEST'; message: string };

/**
 * Every read and write the clarification service makes (src/services/clarifications/clarificationService.ts and
 * the respond and recovery steps it runs). Each write is one transaction of its own; the service
 * needs no atomicity across calls (a claim commits before any delivery, by design). Failures of the
 * database reject; the expected outcomes above are values.
 */
export interface ClarificationStore {
  /** The instant this store stamps its writes with now: a claim's age is measured on the same clock. */
  now(): CanonicalTimestamp;
  getSession(sessionId: string): Promise<SessionRecord | undefined>;
  /** Every row carrying `pendingId`, on any turn or session (identity, not authority). */
  findMessagesByPendingId(pendingId: string): Promise<MessageRecord[]>;
  /** Pending clarification rows on the session's current turn, detached or not, oldest first. */
  findActiveClarificationMessages(sessionId: string): Promise<MessageRecord[]>;
  listUnresolvedClarificationBundles(options: ListBundlesOptions): Promise<BundleListing>;
  detachActiveClarifications(sessionId: string): Promise<MessageRecord[]>;
  expireActiveClarificationBundle(sessionId: string, pendingId: string): Promise<MessageRecord[]>;
  claimClarificationBundle(pendingId: string, outcome: ClaimOutcome): Promise<BundleClaim>;
  finalizeClarificationDelivery(messageIds: readonly string[]): Promise<MessageRecord[]>;
  restoreClaimedClarifications(pendingId: string, terminalStatus: TerminalOutcome, claimedMessageIds: readonly string[]): Promise<RestoreResult>;
  abandonClaimedClarifications(messageIds: readonly string[]): Promise<MessageRecord[]>;
  /** Pending ids whose rows still carry `response_delivery_pending`. */
  listPendingDeliveries(): Promise<string[]>;
  listVisibleTurns(sessionId: string): Promise<TurnRecord[]>;
  getCurrentTurn(sessionId: string): Promise<TurnRecord | undefined>;
  loadTaskPendingState(taskId: string): Promise<TaskPendingState | undefined>;
}

/** The clarification store over the repository functions, on `ctx`'s connection and clock. */
export function createClarificationStore(ctx: RepositoryContext): ClarificationStore {
  return {
    now: () => ctx.clock(),
    getSession: (sessionId) => getSession(ctx, sessionId),
    findMessagesByPendingId: (pendingId) => findMessagesByPendingId(ctx, pendingId),
    findActiveClarificationMessages: (sessionId) => findActiveClarificationMessages(ctx, sessionId),
    async listUnresolvedClarificationBundles(options) {
      try {
        return { ok: true, page: await listUnresolvedClarificationBundles(ctx, options) };
      } catch (err) {
        if (err instanceof InvalidCursorError || err instanceof RangeError) return { ok: false, reason: 'BAD_REQUEST', message: err.message };
        throw err;
      }
    },
    detachActiveClarifications: (sessionId) => detachActiveClarifications(ctx, sessionId),
    expireActiveClarificationBundle: (sessionId, pendingId) => expireActiveClarificationBundle(ctx, sessionId, pendingId),
    async claimClarificationBundle(pendingId, outcome) {
      try {
        return await claimClarificationBundle(ctx, pendingId, outcome);
      } catch (err) {
        if (err instanceof ClaimIntegrityError) return { claimed: false, reason: 'CLAIM_INTEGRITY', message: err.message };
        throw err;
      }
    },
    finalizeClarificationDelivery: (messageIds) => finalizeClarificationDelivery(ctx, messageIds),
    restoreClaimedClarifications: (pendingId, terminalStatus, ids) => restoreClaimedClarifications(ctx, pendingId, terminalStatus, ids),
    abandonClaimedClarifications: (messageIds) => abandonClaimedClarifications(ctx, messageIds),
    listPendingDeliveries: () => listPendingDeliveries(ctx),
    listVisibleTurns: (sessionId) => listVisibleTurns(ctx, sessionId),
    getCurrentTurn: (sessionId) => getCurrentTurn(ctx, sessionId),
    loadTaskPendingState: (taskId) => loadTaskPendingState(ctx, taskId),
  };
}
