import type { Logger } from 'pino';
import { backoffDelayMs, type Backoff } from '../background/backoff.js';
import type { KandevEvent } from '../events/kandevEvents.js';
import type { Metrics } from '../metrics.js';
import type { Failpoints } from '../failpoints.js';
import type { PromptDeliveryLabel, PromptReceiptRecord, PromptReceiptStore, PromptTranscript } from '../repository/promptReceiptStore.js';
import type { AgentPromptDelivery, PromptAttachmentPayload, PromptPayload } from './agentPromptDelivery.js';
import type { EventPublisher, RefreshSummary } from './clarificationPorts.js';
import type { PromptDispatch } from './promptDispatch.js';
import { queueStatusChanged, reservedTurnStarted, sessionClaimedRunning, transcriptAdded, transcriptLabelled } from './promptEvents.js';
import { publishOrRefresh } from './publishOrRefresh.js';
import type { TurnStartHook } from './turnStartHook.js';

/**
 * The prompt dispatcher (design §3.3): delivers each session's durable prompt receipts to its
 * agent, at most once, in order: direct prompts first, then the queue in FIFO order, one receipt
 * of a session at a time.
 *
 * Per session, one pass:
 * 1. Eligibility of the head (task active, session promptable, for a queued row no live
 *    clarification), read without writing; not eligible: done, nothing written. Then W1 reserve the
 *    head (a token, until now + RESERVATION_TTL_MS); nothing reservable: done.
 * 2. Eligibility again under the reservation (it may have changed in between): if not, release
 *    without counting an attempt, and retry after the poll interval.
 * 3. W3 transcript (written for a queued row, read for a direct one) and `message.added`.
 * 4. For a queued row, the turn-start hook (a direct prompt ran it under the admission lease).
 *    From step 1 to settlement a heartbeat renews the reservation (W2) every TTL/3.
 * 5. W4 the at-most-once marker (re-checks eligibility; releases if it no longer holds).
 * 6. Exactly one publish of the prompt.
 * 7. W6 settle: delete the receipt, label the transcript `acknowledged` (PubAck) or `unconfirmed`
 *    (no PubAck and the stream's last prompt of the session is not this one).
 * 8. Events: `task_session.state_changed`, `message.updated`, `turn.started` (acknowledged only),
 *    `message.queue.status_changed`.
 *
 * A failure before step 5 releases the receipt with a backoff of min(60 s, 250 ms · 2^attempts).
 * A lost reservation (a fenced write matched nothing, or the heartbeat found the token gone) is
 * logged as `reservation lost`, and nothing further is written or published by this pass. After
 * step 5 nothing is ever retried: a failure leaves the attempted receipt to its expiry, and
 * reconciliation removes it without dispatch.
 */

export interface PromptDispatcherDeps {
  store: PromptReceiptStore;
  delivery: AgentPromptDelivery;
  events: EventPublisher;
  refreshSummary: RefreshSummary;
  hook: TurnStartHook;
  failpoints: Failpoints;
  logger: Logger;
  /** This dispatcher's name in `delivery_reservation_owner`. */
  owner: string;
  reservationTtlMs: number;
  promptDeadlineMs: number;
  /** The queue limit, the `max` of `message.queue.status_changed`. */
  queueMax: number;
  /** How long a receipt whose session is busy waits before it is reserved again (the poll interval). */
  ineligibleRetryMs: number;
  /** Sessions delivered at once by this process (default 4). */
  maxConcurrentSessions?: number;
  /** Counts each reserved receipt's outcome, and gauges the sessions in delivery and waiting for a slot. */
  metrics?: Metrics;
}

export interface PromptDispatcher extends PromptDispatch {
  /** Starts taking kicks; before it (and after `stop`) a kick is ignored: the receipt waits for the poll. */
  start(): void;
  /** Kicks every session that has a due receipt; resolves once they were scheduled. */
  poll(): Promise<void>;
  /** Resolves once no pass runs or is scheduled. */
  whenIdle(): Promise<void>;
  /** Stops taking kicks and waits for the passes in flight. Idempotent. */
  stop(): Promise<void>;
}

/** Waits before a receipt whose delivery failed is tried again: 250 ms, doubling, at most 60 s. */
const RELEASE_BACKOFF: Backoff = { minTimeout: 250, factor: 2, maxTimeout: 60_000 };

/** Backoff of the next attempt after a failure of attempt number `attempts`: min(60 s, 250 ms · 2^attempts). */
export function releaseBackoffMs(attempts: number): number {
  return backoffDelayMs(RELEASE_BACKOFF, attempts);
}

/**
 * What one pass did with the session's head. `nothing`: no receipt was reserved. Every other outcome
 * follows a reservation, and is counted: `acknowledged` and `unconfirmed` (published, labelled so),
 * `released` (not eligible under the reservation or at the marker: given back, no attempt counted),
 * `failed` (a failure before the marker: released with a backoff, tried again), `abandoned` (a
 * failure after the marker: never sent again, reconciliation settles it), `lost` (the reservation
 * was taken over, released or settled by someone else).
 */
type Outcome = 'nothing' | 'acknowledged' | 'unconfirmed' | 'released' | 'failed' | 'abandoned' | 'lost';

function attachmentPayloads(attachments: readonly unknown[]): PromptAttachmentPayload[] {
  return attachments.flatMap((a) => {
    if (a === null || typeof a !== 'object') return [];
    const r = a as Record<string, unknown>;
    if (typeof r.id !== 'string') return [];
    return [{ id: r.id, name: String(r.name ?? ''), mime_type: String(r.mime_type ?? ''), size_bytes: Number(r.size_bytes ?? 0), storage_key: String(r.storage_key ?? '') }];
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

const POLL_PAGE = 500;

export function createPromptDispatcher(deps: PromptDispatcherDeps): PromptDispatcher {
  const { store } = deps;
  const log = deps.logger.child({ component: 'prompt-dispatcher' });
  const maxConcurrent = deps.maxConcurrentSessions ?? 4;
  const running = new Map<string, Promise<void>>();
  const again = new Set<string>();
  const waiting: string[] = [];
  let accepting = false;
  /** Kicks whose pass has not been scheduled yet (they wait for the next turn of the event loop). */
  let scheduled = 0;
  let idleWaiters: Array<() => void> = [];

  const publish = (taskId: string, events: KandevEvent[]) => publishOrRefresh(deps, log, taskId, events);
  /** The queue's status after a step of a queued receipt; none for a direct one, which never counts. */
  const queueStatus = async (receipt: PromptReceiptRecord, step: string): Promise<KandevEvent[]> => {
    if (receipt.deliveryKind === 'direct') return [];
    const count = await store.countWaiting(receipt.sessionId);
    return [queueStatusChanged(receipt, count, deps.queueMax, `${receipt.id}:${step}`)];
  };

  /** Renews the reservation every TTL/3 until stopped; `lost` turns true once a renewal found the token gone. */
  function heartbeat(receipt: PromptReceiptRecord, token: string) {
    const state = { lost: false };
    const timer = setInterval(() => {
      store.renew(receipt.id, token, deps.reservationTtlMs).then(
        (renewed) => {
          if (!renewed.ok) state.lost = true;
        },
        (err: unknown) => log.warn({ receiptId: receipt.id, err }, 'could not renew a prompt reservation; it expires unless a later renewal succeeds'),
      );
    }, Math.max(1, Math.floor(deps.reservationTtlMs / 3)));
    timer.unref();
    return { state, stop: () => clearInterval(timer) };
  }

  /** One pass over the session's head receipt. */
  async function deliverHead(sessionId: string): Promise<Outcome> {
    // Read first: a busy session or a live clarification is the common case between prompts, and
    // must cost no write (a reserve and release would also flap the waiting count and its events).
    const ready = await store.headEligibility(sessionId);
    if (!ready) return 'nothing';
    if (!ready.ok) {
      log.debug({ sessionId, reason: ready.reason }, 'head prompt receipt not eligible yet');
      return 'nothing';
    }
    const reservation = await store.reserveHead(sessionId, deps.owner, deps.reservationTtlMs);
    if (!reservation) return 'nothing';
    const { receipt, token } = reservation;
    const rlog = log.child({ receiptId: receipt.id, sessionId, taskId: receipt.taskId, deliveryKind: receipt.deliveryKind });
    const lost = (step: string): Outcome => {
      rlog.warn({ step }, 'reservation lost');
      return 'lost';
    };
    let marked = false;
    const beat = heartbeat(receipt, token);
    // The pass's events are hints for the summary (publishOrRefresh never rejects): issued as each
    // step commits, in step order, but not waited for before the next step, so the prompt's publish
    // waits for the database only. The pass ends once they all went out.
    const issued: Array<Promise<void>> = [];
    const issue = (events: () => Promise<KandevEvent[]> | KandevEvent[]) => {
      issued.push(Promise.resolve().then(events).then((e) => publish(receipt.taskId, e), (err: unknown) => rlog.warn({ err }, 'could not build the events of a prompt delivery step')));
    };
    try {
      await deps.failpoints.reach('after_reserve');
      const eligible = await store.checkEligibility(receipt.id, token);
      if (!eligible.ok) {
        if (eligible.reason === 'reservation_lost') return lost('eligibility');
        // Not a failure: the session is busy (or its task archived); the receipt waits, uncounted.
        const released = await store.release(receipt.id, token, { retryAfterMs: deps.ineligibleRetryMs, error: eligible.reason, countsAsAttempt: false });
        if (!released.ok) return lost('release');
        rlog.debug({ reason: eligible.reason }, 'prompt receipt not eligible yet');
        return 'released';
      }
      issue(() => queueStatus(receipt, `reserved:${receipt.deliveryAttempts}`));

      const transcript = await store.persistTranscript(receipt.id, token);
      if (!transcript.ok) {
        if (transcript.reason === 'reservation_lost') return lost('transcript');
        throw new Error(`the transcript message of receipt ${receipt.id} is gone`);
      }
      issue(() => transcriptAdded(transcript.message));
      await deps.failpoints.reach('after_transcript');

      if (receipt.deliveryKind !== 'direct') {
        const hook = await deps.hook.beforePrompt({ task_id: receipt.taskId, session_id: sessionId, caller_id: receipt.id, delivery_kind: 'queued' });
        if (!hook.ok) throw new Error(`the turn-start hook failed (${hook.reason}): ${hook.detail}`);
      }
      if (beat.state.lost) return lost('hook');

      const mark = await store.markAttempted(receipt.id, token, { retryAfterMs: deps.ineligibleRetryMs });
      if (!mark.ok) {
        if (mark.reason === 'reservation_lost') return lost('marker');
        rlog.info({ reason: mark.reason }, 'prompt receipt released at its delivery marker');
        issue(() => queueStatus(receipt, `released:${receipt.deliveryAttempts}`));
        return 'released';
      }
      marked = true;
      await deps.failpoints.reach('after_marker_commit');

      // The one publish of this receipt, ever.
      const published = await deps.delivery.publishPrompt(promptPayload(receipt, transcript, mark.passthrough), deps.promptDeadlineMs);
      await deps.failpoints.reach('after_publish');
      let label: PromptDeliveryLabel = 'acknowledged';
      if (!published.acknowledged) {
        const stored = await deps.delivery.wasPromptStored(sessionId, receipt.id).catch((err: unknown) => {
          rlog.warn({ err }, 'could not ask the prompt stream whether it holds the prompt');
          return false;
        });
        label = stored ? 'acknowledged' : 'unconfirmed';
        rlog.warn({ reason: published.reason, label }, 'the prompt publish was not acknowledged; it is not sent again');
      }
      issue(() => [sessionClaimedRunning(receipt, mark.previousState)]);

      const settled = await store.settle(receipt.id, token, label, transcript.message.id);
      if (!settled.ok) {
        const upgraded = settled.upgraded;
        if (upgraded) issue(() => transcriptLabelled(upgraded, 'acknowledged'));
        return lost('settle');
      }
      issue(async () => [
        ...(settled.message ? transcriptLabelled(settled.message, label) : []),
        ...(label === 'acknowledged' ? [reservedTurnStarted(transcript.message, { id: transcript.turnId })] : []),
        ...(await queueStatus(receipt, 'settled')),
      ]);
      rlog.debug({ label }, 'prompt delivered');
      return label;
    } catch (err) {
      if (marked) {
        // After the marker nothing is retried: reconciliation removes the receipt once its reservation expired.
        rlog.error({ err }, 'prompt delivery failed after its at-most-once marker; reconciliation settles it without resending');
        return 'abandoned';
      }
      rlog.warn({ err }, 'prompt delivery failed before its marker; released for retry');
      await store
        .release(receipt.id, token, { retryAfterMs: releaseBackoffMs(receipt.deliveryAttempts), error: (err as Error).message ?? String(err) })
        .then(async (released) => {
          if (released.ok) issue(() => queueStatus(receipt, `released:${receipt.deliveryAttempts}`));
        })
        .catch((releaseErr: unknown) => rlog.warn({ err: releaseErr }, 'could not release the prompt receipt; its reservation expires instead'));
      return 'failed';
    } finally {
      beat.stop();
      await Promise.all(issued);
    }
  }

  const sessionsGauge = () => {
    deps.metrics?.dispatcherSessions.set({ state: 'delivering' }, running.size);
    deps.metrics?.dispatcherSessions.set({ state: 'waiting' }, waiting.length);
  };
  sessionsGauge();

  function settleIdle() {
    if (running.size > 0 || waiting.length > 0 || scheduled > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w();
  }

  function launch(sessionId: string): void {
    const run = (async () => {
      do {
        again.delete(sessionId);
        try {
          const outcome = await deliverHead(sessionId);
          if (outcome !== 'nothing') deps.metrics?.promptDeliveryAttempts.inc({ outcome });
        } catch (err) {
          log.error({ sessionId, err }, 'prompt dispatch pass failed');
        }
      } while (again.has(sessionId) && accepting);
    })().finally(() => {
      running.delete(sessionId);
      const next = waiting.shift();
      if (next !== undefined && accepting) launch(next);
      sessionsGauge();
      settleIdle();
    });
    running.set(sessionId, run);
    sessionsGauge();
  }

  /**
   * A kick from admission arrives while its endpoint is still replying: the pass starts on the next
   * turn of the event loop, after that reply went out. On SQLite every statement runs synchronously
   * on this thread, so a pass started at once would hold the reply back by its first statements.
   */
  function kick(sessionId: string): void {
    if (!accepting || !store.available) return;
    scheduled++;
    setImmediate(() => {
      scheduled--;
      schedule(sessionId);
      settleIdle();
    });
  }

  function schedule(sessionId: string): void {
    if (!accepting) return;
    if (running.has(sessionId)) {
      again.add(sessionId);
      return;
    }
    if (waiting.includes(sessionId)) return;
    if (running.size >= maxConcurrent) {
      waiting.push(sessionId);
      sessionsGauge();
      return;
    }
    launch(sessionId);
  }

  return {
    kick,
    start() {
      accepting = true;
    },
    async poll() {
      if (!accepting) return;
      // Every page, so no set of sessions can starve the rest; a kick beyond the concurrency waits its turn.
      let after: string | undefined;
      for (;;) {
        const page = await store.listDispatchableSessions(POLL_PAGE, after);
        for (const sessionId of page) schedule(sessionId);
        if (page.length < POLL_PAGE || !accepting) break;
        after = page[page.length - 1];
      }
    },
    whenIdle() {
      if (running.size === 0 && waiting.length === 0 && scheduled === 0) return Promise.resolve();
      return new Promise<void>((resolve) => idleWaiters.push(resolve));
    },
    async stop() {
      accepting = false;
      waiting.length = 0;
      sessionsGauge();
      again.clear();
      await Promise.all([...running.values()]);
    },
  };
}
