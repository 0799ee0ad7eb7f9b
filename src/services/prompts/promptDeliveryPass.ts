import type { Logger } from 'pino';
import { periodic, type Periodic } from '../../background/periodic.js';
import type { KandevEvent } from '../../contract/kandevEvents.js';
import type { Failpoints } from '../../failpoints.js';
import type {
  MarkResult,
  PromptDeliveryLabel,
  PromptReceiptRecord,
  PromptReceiptStore,
  PromptTranscript,
} from '../../repository/prompts/promptReceiptStore.js';
import type { AgentPromptDelivery, PromptAttachmentPayload, PromptPayload } from './agentPromptDelivery.js';
import type { EventPublisher, RefreshSummary } from '../clarifications/clarificationPorts.js';
import { queueStatusChanged, reservedTurnStarted, sessionClaimedRunning, transcriptAdded, transcriptLabelled } from './promptEvents.js';
import { publishOrRefresh } from '../publishOrRefresh.js';
import type { TurnStartHook } from './turnStartHook.js';

/**
 * One delivery pass over a session's head prompt receipt: the ordered steps below, each a function
 * a reader takes in one at a time. Every write after the reservation is fenced by its token; a
 * fenced write that matched nothing, or a renewal that found the token gone, means someone else
 * took the receipt over, released or settled it: the pass logs `reservation lost` and writes and
 * publishes nothing more. At most once: the marker is written before the one publish, and after
 * the marker nothing is ever retried.
 */

export interface DeliveryPassDeps {
  store: PromptReceiptStore;
  delivery: AgentPromptDelivery;
  events: EventPublisher;
  refreshSummary: RefreshSummary;
  hook: TurnStartHook;
  failpoints: Failpoints;
  /** This dispatcher's name in `delivery_reservation_owner`. */
  owner: string;
  reservationTtlMs: number;
  promptDeadlineMs: number;
  /** The queue limit, the `max` of `message.queue.status_changed`. */
  queueMax: number;
  /** How long a receipt whose session is busy waits before it is reserved again (the poll interval). */
  ineligibleRetryMs: number;
  /** The wait before a receipt whose delivery failed before its marker is tried again. */
  releaseBackoffMs(attempts: number): number;
  /**
   * Told when the session's head can never be delivered (a Run guarded to a session that is no
   * longer the primary): the worker has the queue lifecycle cancel it, its comments returned.
   */
  onUndeliverable?(sessionId: string): void;
}

/** A refusal that no later pass can lift: the entry must go, not wait. */
function refusedForGood(deps: DeliveryPassDeps, sessionId: string, reason: string): void {
  if (reason === 'primary_session_changed') deps.onUndeliverable?.(sessionId);
}

/**
 * What one pass did with the session's head. `nothing`: no receipt was reserved. Every other outcome
 * follows a reservation, and is counted: `acknowledged` and `unconfirmed` (published, labelled so),
 * `released` (not eligible under the reservation or at the marker: given back, no attempt counted),
 * `failed` (a failure before the marker: released with a backoff, tried again), `abandoned` (a
 * failure after the marker: never sent again, reconciliation settles it), `lost` (the reservation
 * was taken over, released or settled by someone else).
 */
/** A pass's options: a drain's (`queue.drain`), which also wants to know what the pass did. */
export interface PassOptions {
  /** Deliver the head of a paused queue. */
  drain?: boolean;
  /** Told the receipt the pass reserved. */
  onReserved?(receiptId: string): void;
  /** Told why the head was not eligible (nothing reserved). */
  onRefused?(reason: string): void;
}

export type DeliveryOutcome = 'nothing' | 'acknowledged' | 'unconfirmed' | 'released' | 'failed' | 'abandoned' | 'lost';

/** What the steps of a pass share; each step fills in what the later ones read. */
interface Pass {
  readonly deps: DeliveryPassDeps;
  readonly sessionId: string;
  readonly receipt: PromptReceiptRecord;
  readonly token: string;
  readonly log: Logger;
  /** Turns true once a renewal found the reservation gone. */
  readonly heartbeat: { lost: boolean };
  /**
   * Issues events of a step that committed: in step order, but not waited for before the next step
   * (they are hints for the summary, and `publishOrRefresh` never rejects), so the prompt's publish
   * waits for the database only. The pass ends once they all went out.
   */
  issue(events: () => Promise<KandevEvent[]> | KandevEvent[]): void;
  transcript?: PromptTranscript;
  marker?: Extract<MarkResult, { ok: true }>;
  label?: PromptDeliveryLabel;
}

/** A step returns an outcome to end the pass there, or nothing to go on to the next. */
type Step = (pass: Pass) => Promise<DeliveryOutcome | undefined>;

/** The steps after the reservation, in order. The marker divides them: a failure before it is retried, after it never. */
const STEPS: ReadonlyArray<Step> = [recheckUnderReservation, writeTranscript, runTurnStartHook, markAttempted, publishPrompt, settleReceipt];

/**
 * One pass over the session's head: read its eligibility and reserve it (nothing written when
 * it is not eligible), then take the steps in order, with a heartbeat renewing the reservation
 * every TTL/3 until the pass ends.
 */
export async function deliverHead(deps: DeliveryPassDeps, log: Logger, sessionId: string, options: PassOptions = {}): Promise<DeliveryOutcome> {
  const reservation = await reserveEligibleHead(deps, log, sessionId, options);
  if (!reservation) return 'nothing';
  const { receipt, token } = reservation;
  options.onReserved?.(receipt.id);
  const rlog = log.child({ receiptId: receipt.id, sessionId, taskId: receipt.taskId, deliveryKind: receipt.deliveryKind });
  const issued: Array<Promise<void>> = [];
  const heartbeatState = { lost: false };
  const pass: Pass = {
    deps,
    sessionId,
    receipt,
    token,
    log: rlog,
    heartbeat: heartbeatState,
    issue: (events) => {
      issued.push(
        Promise.resolve()
          .then(events)
          .then(
            (e) => publishOrRefresh(deps, rlog, receipt.taskId, e),
            (err: unknown) => rlog.warn({ err }, 'could not build the events of a prompt delivery step'),
          ),
      );
    },
  };
  const beat = heartbeat(pass, heartbeatState);
  await beat.start();
  try {
    for (const step of STEPS) {
      const outcome = await step(pass);
      if (outcome) return outcome;
    }
    throw new Error('the prompt delivery steps ended without an outcome');
  } catch (err) {
    return pass.marker ? abandonAfterMarker(pass, err) : releaseForRetry(pass, err);
  } finally {
    await beat.stop();
    await Promise.all(issued);
  }
}

/**
 * Read first: a busy session or a live clarification is the common case between prompts, and must
 * cost no write (a reserve and release would also flap the waiting count and its events). Then the
 * reservation of the head (a token, until now + the TTL); undefined when there is nothing to do.
 */
async function reserveEligibleHead(deps: DeliveryPassDeps, log: Logger, sessionId: string, options: PassOptions) {
  const head = { drain: options.drain === true };
  const ready = await deps.store.headEligibility(sessionId, head);
  if (!ready) return undefined;
  if (!ready.ok) {
    log.debug({ sessionId, reason: ready.reason }, 'head prompt receipt not eligible yet');
    options.onRefused?.(ready.reason);
    refusedForGood(deps, sessionId, ready.reason);
    return undefined;
  }
  return deps.store.reserveHead(sessionId, deps.owner, deps.reservationTtlMs, head);
}

/** Renews the reservation every TTL/3 while the pass runs; a renewal that found the token gone ends it. */
function heartbeat(pass: Pass, state: { lost: boolean }): Periodic {
  const { deps, receipt, token } = pass;
  return periodic({
    intervalMs: Math.max(1, Math.floor(deps.reservationTtlMs / 3)),
    firstRun: 'after-interval',
    logger: pass.log,
    failureMessage: 'could not renew a prompt reservation; it expires unless a later renewal succeeds',
    failureLevel: 'warn',
    run: async () => {
      const renewed = await deps.store.renew(receipt.id, token, deps.reservationTtlMs);
      if (renewed.ok) return undefined;
      state.lost = true;
      return 'done';
    },
  });
}

function lost(pass: Pass, step: string): DeliveryOutcome {
  pass.log.warn({ step }, 'reservation lost');
  return 'lost';
}

/** The queue's status after a step of a queued receipt; none for a direct one, which never counts. */
async function queueStatus(pass: Pass, step: string): Promise<KandevEvent[]> {
  const { receipt, deps } = pass;
  if (receipt.deliveryKind === 'direct') return [];
  return [queueStatusChanged(receipt, await deps.store.queueStatus(receipt.sessionId), deps.queueMax, `${receipt.id}:${step}`)];
}

/** Eligibility again under the reservation (it may have changed since the read): if not, released, uncounted. */
async function recheckUnderReservation(pass: Pass): Promise<DeliveryOutcome | undefined> {
  const { deps, receipt, token } = pass;
  await deps.failpoints.reach('after_reserve');
  const eligible = await deps.store.checkEligibility(receipt.id, token);
  if (!eligible.ok) {
    if (eligible.reason === 'reservation_lost') return lost(pass, 'eligibility');
    // Not a failure: the session is busy (or its task archived); the receipt waits, uncounted.
    const released = await deps.store.release(receipt.id, token, { retryAfterMs: deps.ineligibleRetryMs, error: eligible.reason, countsAsAttempt: false });
    if (!released.ok) return lost(pass, 'release');
    pass.log.debug({ reason: eligible.reason }, 'prompt receipt not eligible yet');
    refusedForGood(deps, pass.sessionId, eligible.reason);
    return 'released';
  }
  pass.issue(() => queueStatus(pass, `reserved:${receipt.deliveryAttempts}`));
  return undefined;
}

/** The transcript message: written for a queued receipt, read for a direct one (admission wrote it); then `message.added`. */
async function writeTranscript(pass: Pass): Promise<DeliveryOutcome | undefined> {
  const { deps, receipt, token } = pass;
  const transcript = await deps.store.persistTranscript(receipt.id, token);
  if (!transcript.ok) {
    if (transcript.reason === 'reservation_lost') return lost(pass, 'transcript');
    throw new Error(`the transcript message of receipt ${receipt.id} is gone`);
  }
  pass.transcript = transcript;
  pass.issue(() => transcriptAdded(transcript.message));
  await deps.failpoints.reach('after_transcript');
  return undefined;
}

/** For a queued receipt, the turn-start hook (a direct prompt ran it under the admission lease); then the heartbeat's word. */
async function runTurnStartHook(pass: Pass): Promise<DeliveryOutcome | undefined> {
  const { deps, receipt } = pass;
  if (receipt.deliveryKind !== 'direct') {
    const hook = await deps.hook.beforePrompt({ task_id: receipt.taskId, session_id: pass.sessionId, caller_id: receipt.id, delivery_kind: 'queued' });
    if (!hook.ok) throw new Error(`the turn-start hook failed (${hook.reason}): ${hook.detail}`);
  }
  if (pass.heartbeat.lost) return lost(pass, 'hook');
  return undefined;
}

/** The at-most-once marker; it checks eligibility again under its locks and releases, uncounted, when it no longer holds. */
async function markAttempted(pass: Pass): Promise<DeliveryOutcome | undefined> {
  const { deps, receipt, token } = pass;
  const mark = await deps.store.markAttempted(receipt.id, token, { retryAfterMs: deps.ineligibleRetryMs });
  if (!mark.ok) {
    if (mark.reason === 'reservation_lost') return lost(pass, 'marker');
    pass.log.info({ reason: mark.reason }, 'prompt receipt released at its delivery marker');
    pass.issue(() => queueStatus(pass, `released:${receipt.deliveryAttempts}`));
    refusedForGood(deps, pass.sessionId, mark.reason);
    return 'released';
  }
  pass.marker = mark;
  await deps.failpoints.reach('after_marker_commit');
  return undefined;
}

/**
 * The one publish of this receipt, ever. Unacknowledged, the stream is asked whether it holds the
 * prompt anyway: `acknowledged` if so, else `unconfirmed`. Then the session's RUNNING claim.
 */
async function publishPrompt(pass: Pass): Promise<DeliveryOutcome | undefined> {
  const { deps, receipt, sessionId } = pass;
  const marker = pass.marker!;
  const published = await deps.delivery.publishPrompt(promptPayload(receipt, pass.transcript!, marker.passthrough), deps.promptDeadlineMs);
  await deps.failpoints.reach('after_publish');
  pass.label = 'acknowledged';
  if (!published.acknowledged) {
    const stored = await deps.delivery.wasPromptStored(sessionId, receipt.id).catch((err: unknown) => {
      pass.log.warn({ err }, 'could not ask the prompt stream whether it holds the prompt');
      return false;
    });
    pass.label = stored ? 'acknowledged' : 'unconfirmed';
    pass.log.warn({ reason: published.reason, label: pass.label }, 'the prompt publish was not acknowledged; it is not sent again');
  }
  pass.issue(() => [sessionClaimedRunning(receipt, marker.previousState)]);
  return undefined;
}

/** Settle: the receipt deleted, its transcript labelled; then `message.updated`, `turn.started` (acknowledged only) and the queue's status. */
async function settleReceipt(pass: Pass): Promise<DeliveryOutcome | undefined> {
  const { deps, receipt, token } = pass;
  const transcript = pass.transcript!;
  const label = pass.label!;
  const settled = await deps.store.settle(receipt.id, token, label, transcript.message.id);
  if (!settled.ok) {
    const upgraded = settled.upgraded;
    if (upgraded) pass.issue(() => transcriptLabelled(upgraded, 'acknowledged'));
    return lost(pass, 'settle');
  }
  pass.issue(async () => [
    ...(settled.message ? transcriptLabelled(settled.message, label) : []),
    ...(label === 'acknowledged' ? [reservedTurnStarted(transcript.message, { id: transcript.turnId })] : []),
    ...(await queueStatus(pass, 'settled')),
  ]);
  pass.log.debug({ label }, 'prompt delivered');
  return label;
}

/** A failure after the marker: nothing is retried; reconciliation removes the receipt once its reservation expired. */
function abandonAfterMarker(pass: Pass, err: unknown): DeliveryOutcome {
  pass.log.error({ err }, 'prompt delivery failed after its at-most-once marker; reconciliation settles it without resending');
  return 'abandoned';
}

/** A failure before the marker: released with a backoff growing with its attempts, to be tried again. */
async function releaseForRetry(pass: Pass, err: unknown): Promise<DeliveryOutcome> {
  const { deps, receipt, token } = pass;
  pass.log.warn({ err }, 'prompt delivery failed before its marker; released for retry');
  await deps.store
    .release(receipt.id, token, { retryAfterMs: deps.releaseBackoffMs(receipt.deliveryAttempts), error: (err as Error).message ?? String(err) })
    .then(async (released) => {
      if (released.ok) pass.issue(() => queueStatus(pass, `released:${receipt.deliveryAttempts}`));
    })
    .catch((releaseErr: unknown) => pass.log.warn({ err: releaseErr }, 'could not release the prompt receipt; its reservation expires instead'));
  return 'failed';
}

function attachmentPayloads(attachments: readonly unknown[]): PromptAttachmentPayload[] {
  return attachments.flatMap((a) => {
    if (a === null || typeof a !== 'object') return [];
    const r = a as Record<string, unknown>;
    if (typeof r.id !== 'string') return [];
    return [
      {
        id: r.id,
        name: String(r.name ?? ''),
        mime_type: String(r.mime_type ?? ''),
        size_bytes: Number(r.size_bytes ?? 0),
        storage_key: String(r.storage_key ?? ''),
      },
    ];
  });
}

function promptPayload(receipt: PromptReceiptRecord, transcript: PromptTranscript, passthrough: boolean): PromptPayload {
  return {
    receipt_id: receipt.id,
    caller_id: receipt.id,
    task_id: receipt.taskId,
    session_id: receipt.sessionId,
    turn_id: transcript.turnId,
    message_id: transcript.message.id,
    delivery_kind: receipt.deliveryKind === 'direct' ? 'direct' : 'queued',
    content: receipt.content,
    attachments: attachmentPayloads(receipt.attachments),
    model: receipt.model,
    plan_mode: receipt.planMode,
    passthrough,
    prompt_seq: transcript.promptSeq,
  };
}
