import { errors, headers, RequestError, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import pRetry, { AbortError } from 'p-retry';
import type { Clock } from '../../timestamps.js';
import type { ClarificationDeliveryPayload } from '../../contract/clarificationPayloads.js';
import type { ClarificationDelivery, LiveDeliveryResult, ResumeResult } from '../../services/clarifications/clarificationPorts.js';
import { createEnvelope } from '../../contract/envelope.js';
import type { Topology } from '../../contract/subjects.js';

const encoder = new TextEncoder();
const PENDING_ID_HEADER = 'Pending-Projector-Pending-Id';
const CLAIM_ID_HEADER = 'Pending-Projector-Claim-Id';
const CLARIFICATION_RESUME = 'clarification.resume';

/** JetStream reports "no stream captures this subject" as JetStreamNotEnabled caused by no responders. */
function isNoResponders(err: unknown): boolean {
  const cause = (err as { cause?: unknown })?.cause;
  return (err instanceof RequestError && err.isNoResponders()) || (cause instanceof RequestError && cause.isNoResponders());
}

/** The JetStream message id of a claim's resume command: a retried publish of one claim dedupes. */
export function resumeMsgId(pendingId: string, claimId: string): string {
  return `resume:${pendingId}:${claimId}`;
}

/**
 * Delivers claimed clarification responses to agents over NATS:
 * - live: a request to `<prefix>agent.<session_id>.clarification`; "no responders" means no live
 *   waiter (the session is detached); a reply `{ok: true}` is the waiter's durable receipt, anything
 *   else or no reply in time is "not confirmed";
 * - detached: a JetStream publish of the envelope to `<prefix>agent.<session_id>.resume`, accepted
 *   when the resume stream's PubAck arrives within the deadline.
 */
export class NatsClarificationDelivery implements ClarificationDelivery {
  private readonly js: JetStreamClient;
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly topology: Topology,
    private readonly clock: Clock,
  ) {
    this.js = jetstream(nc);
  }

  async deliverToLiveWaiter(sessionId: string, payload: ClarificationDeliveryPayload, timeoutMs: number): Promise<LiveDeliveryResult> {
    let reply;
    try {
      reply = await this.nc.request(this.topology.agentWaiterSubject(sessionId), encoder.encode(JSON.stringify(payload)), { timeout: timeoutMs });
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders()) return { outcome: 'no_waiter' };
      if (err instanceof errors.TimeoutError) return { outcome: 'unconfirmed', reason: `no confirmation within ${timeoutMs} ms` };
      return { outcome: 'unconfirmed', reason: (err as Error).message };
    }
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(reply.data));
    } catch {
      return { outcome: 'unconfirmed', reason: 'the waiter replied with invalid JSON' };
    }
    if (body && typeof body === 'object' && (body as { ok?: unknown }).ok === true) return { outcome: 'confirmed' };
    return { outcome: 'unconfirmed', reason: `the waiter replied ${JSON.stringify(body).slice(0, 200)}` };
  }

  async publishResume(sessionId: string, payload: ClarificationDeliveryPayload, deadlineMs: number): Promise<ResumeResult> {
    const subject = this.topology.agentResumeSubject(sessionId);
    const msgID = resumeMsgId(payload.pending_id, payload.claim_id);
    const data = encoder.encode(JSON.stringify(createEnvelope(CLARIFICATION_RESUME, subject, { ...payload }, msgID, this.clock())));
    const h = headers();
    h.set(PENDING_ID_HEADER, payload.pending_id);
    h.set(CLAIM_ID_HEADER, payload.claim_id);
    const deadline = Date.now() + deadlineMs;
    const noAttempt = new Error('no attempt');
    let lastError = noAttempt;
    // The last "no stream" answer: a final attempt started with a sliver of the deadline left can
    // time out, and "timeout" would then hide that no stream captures the subject.
    let noStream: Error | undefined;
    const attempt = async () => {
      const remaining = deadline - Date.now();
      // The deadline passed during the wait: report the attempt before it, not a new one.
      if (remaining <= 0) throw new AbortError(lastError);
      try {
        return await this.js.publish(subject, data, { msgID, headers: h, timeout: remaining });
      } catch (err) {
        lastError = err as Error;
        if (isNoResponders(err)) noStream = lastError;
        throw err;
      }
    };
    try {
      // No stream captures the subject (yet): it may be re-created; retried every 200 ms until the
      // deadline. Any other refusal is final at once; a timeout used the whole deadline.
      const ack = await pRetry(attempt, {
        retries: Infinity,
        factor: 1,
        minTimeout: 200,
        maxRetryTime: Math.max(0, deadlineMs),
        shouldRetry: ({ error }) => isNoResponders(error),
      });
      return { accepted: true, duplicate: ack.duplicate };
    } catch (err) {
      if (err !== noAttempt && !isNoResponders(err) && !(err instanceof errors.TimeoutError)) return { accepted: false, reason: (err as Error).message };
    }
    // A lost PubAck does not mean a lost message: ask the stream before reporting failure.
    if (await this.storedResume(subject, payload.pending_id, payload.claim_id).catch(() => false)) return { accepted: true, duplicate: false };
    return { accepted: false, reason: (lastError instanceof errors.TimeoutError && noStream ? noStream : lastError).message };
  }

  async wasResumeAccepted(sessionId: string, pendingId: string): Promise<boolean> {
    return this.storedResume(this.topology.agentResumeSubject(sessionId), pendingId);
  }

  private async storedResume(subject: string, pendingId: string, claimId?: string): Promise<boolean> {
    this.jsm ??= jetstreamManager(this.nc).catch((err: unknown) => {
      this.jsm = undefined;
      throw err;
    });
    const stored = await (await this.jsm).streams.getMessage(this.topology.agentResumeStream, { last_by_subj: subject });
    if (!stored) return false;
    return stored.header?.get(PENDING_ID_HEADER) === pendingId && (claimId === undefined || stored.header?.get(CLAIM_ID_HEADER) === claimId);
  }
}
