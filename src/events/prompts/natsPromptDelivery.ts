import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Clock } from '../../timestamps.js';
import type { AgentPromptDelivery, PromptPayload, PromptPublishResult } from '../../services/prompts/agentPromptDelivery.js';
import { createEnvelope } from '../../contract/envelope.js';
import type { Topology } from '../../contract/subjects.js';

const encoder = new TextEncoder();
export const RECEIPT_ID_HEADER = 'Pending-Projector-Receipt-Id';
export const CALLER_ID_HEADER = 'Pending-Projector-Caller-Id';
export const SESSION_PROMPT = 'session.prompt';

/** The JetStream message id of a receipt's prompt: a repeat within the duplicate window is dropped by the stream. */
export function promptMsgId(receiptId: string): string {
  return `prompt:${receiptId}`;
}

/**
 * Delivers prompts to agents: one JetStream publish of the `session.prompt` envelope to
 * `<prefix>agent.<session_id>.prompt`, whose PubAck within the deadline is the prompt's
 * acceptance. Unlike the clarification resume (NatsClarificationDelivery), nothing is retried, not
 * even on "no responders": after the at-most-once marker a second publish could be a second
 * prompt. `wasPromptStored` only labels an attempt whose acknowledgement was lost.
 */
export class NatsPromptDelivery implements AgentPromptDelivery {
  private readonly js: JetStreamClient;
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly topology: Topology,
    private readonly clock: Clock,
  ) {
    this.js = jetstream(nc);
  }

  async publishPrompt(payload: PromptPayload, deadlineMs: number): Promise<PromptPublishResult> {
    const subject = this.topology.agentPromptSubject(payload.session_id);
    const msgID = promptMsgId(payload.receipt_id);
    const data = encoder.encode(JSON.stringify(createEnvelope(SESSION_PROMPT, subject, { ...payload }, msgID, this.clock())));
    const h = headers();
    h.set(RECEIPT_ID_HEADER, payload.receipt_id);
    h.set(CALLER_ID_HEADER, payload.caller_id);
    try {
      // retries: 1 is one request: the client's default, spelled out because it is the rule here.
      const ack = await this.js.publish(subject, data, { msgID, headers: h, timeout: deadlineMs, retries: 1 });
      return { acknowledged: true, duplicate: ack.duplicate };
    } catch (err) {
      return { acknowledged: false, reason: (err as Error).message };
    }
  }

  async wasPromptStored(sessionId: string, receiptId: string): Promise<boolean> {
    this.jsm ??= jetstreamManager(this.nc).catch((err: unknown) => {
      this.jsm = undefined;
      throw err;
    });
    const stored = await (await this.jsm).streams.getMessage(this.topology.agentPromptStream, { last_by_subj: this.topology.agentPromptSubject(sessionId) });
    return stored?.header?.get(RECEIPT_ID_HEADER) === receiptId;
  }
}
