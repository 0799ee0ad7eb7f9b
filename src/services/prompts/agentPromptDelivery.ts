/**
 * The prompt dispatcher's port onto the agent: how a reserved, marked receipt reaches the agent
 * of its session (src/events/prompts/natsPromptDelivery.ts wires it to JetStream). The dispatcher calls
 * `publishPrompt` exactly once per receipt, after its at-most-once marker committed, and never
 * again for that receipt, whatever it returned.
 */

/** One attachment as the agent receives it (metadata only: the bytes are the uploader's). */
export interface PromptAttachmentPayload {
  id: string;
  name: string;
  mime_type: string;
  size_bytes: number;
  storage_key: string;
}

/** The `data` of a `session.prompt` envelope: the prompt as the agent receives it (docs/contract.md, docs/endpoints.md). */
export interface PromptPayload {
  receipt_id: string;
  caller_id: string;
  task_id: string;
  session_id: string;
  turn_id: string;
  message_id: string;
  delivery_kind: 'direct' | 'queued';
  content: string;
  attachments: PromptAttachmentPayload[];
  model: string;
  plan_mode: boolean;
  passthrough: boolean;
  prompt_seq: number | null;
}

export type PromptPublishResult =
  /** The prompt stream acknowledged it within the deadline: the agent's durable inbox has it. */
  | { acknowledged: true; duplicate: boolean }
  /** No acknowledgement handled (timeout, refusal, transport): the prompt may or may not be stored. */
  | { acknowledged: false; reason: string };

export interface AgentPromptDelivery {
  /** One publish attempt, bounded by `deadlineMs`; never retried, never throws. */
  publishPrompt(payload: PromptPayload, deadlineMs: number): Promise<PromptPublishResult>;
  /**
   * Whether the prompt stream holds this receipt's prompt as the last message on the session's
   * subject. At most one receipt of a session is ever attempted at a time, so the last message is
   * the only candidate. Rejects when the stream cannot be asked: unknown is not "no".
   */
  wasPromptStored(sessionId: string, receiptId: string): Promise<boolean>;
}
