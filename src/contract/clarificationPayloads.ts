/** What the clarification endpoints and the agent's delivery carry of a bundle's answers. */

/** One answer as stored on a question row and sent to the agent. */
export interface ClarificationAnswerPayload {
  question_id: string;
  selected_options: string[];
  custom_text: string;
}

/**
 * What the agent receives for a claimed bundle, live or through a resume command. `claim_id`
 * identifies this claim: a retried delivery of the same claim carries the same id.
 */
export interface ClarificationDeliveryPayload {
  pending_id: string;
  claim_id: string;
  session_id: string;
  task_id: string;
  clarification_turn_id: string;
  status: 'answered' | 'rejected';
  /** In the bundle's question order; empty for a rejection. */
  answers: ClarificationAnswerPayload[];
  rejected: boolean;
  reject_reason: string;
  responded_at: string;
}
