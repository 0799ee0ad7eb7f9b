import { isTruthyFlag } from '../../turns/lifecycleTurn.js';
import type { ClarificationAnswerPayload } from '../../contract/clarificationPayloads.js';
import { isPendingStatus, type BundleQuestionView, type BundleRow, type NormalizedOutcome } from './outcomeValidation.js';

/**
 * After a lost claim: is this request a retry of the outcome that already won this very bundle? Then
 * the recorded outcome is replayed (`claimed: false`), which makes client retries idempotent.
 * Anything else is a conflict: a different outcome (a lost race), a bundle still pending (superseded
 * turn, terminal session, malformed), a delivery still in flight, or a bundle that was expired,
 * cancelled or whose response was never delivered.
 */

export interface RecordedRow extends BundleRow {
  updatedAt: string;
}

export type RecordedOutcome =
  | { replay: true; status: 'answered' | 'rejected'; answers: ClarificationAnswerPayload[]; rejectReason: string; respondedAt: string }
  | { replay: false; reason: string };

function storedAnswer(metadata: Record<string, unknown>, questionId: string): ClarificationAnswerPayload | undefined {
  const response = metadata.response;
  if (!response || typeof response !== 'object' || Array.isArray(response)) return undefined;
  const { selected_options: selected, custom_text: text } = response as Record<string, unknown>;
  return {
    question_id: questionId,
    selected_options: Array.isArray(selected) ? selected.filter((o): o is string => typeof o === 'string') : [],
    custom_text: typeof text === 'string' ? text : '',
  };
}

function sameAnswer(a: ClarificationAnswerPayload, b: ClarificationAnswerPayload): boolean {
  const left = [...new Set(a.selected_options)].sort();
  const right = [...new Set(b.selected_options)].sort();
  return a.custom_text === b.custom_text && left.length === right.length && left.every((o, i) => o === right[i]);
}

export function recordedOutcome(rows: readonly RecordedRow[], questions: readonly BundleQuestionView[], outcome: NormalizedOutcome): RecordedOutcome {
  if (rows.some((r) => isPendingStatus(r.metadata))) {
    return { replay: false, reason: 'the clarification is no longer active (its turn was superseded, its session is terminal, or the bundle is malformed)' };
  }
  if (rows.some((r) => isTruthyFlag(r.metadata.response_delivery_pending))) {
    return { replay: false, reason: 'another response to this clarification is being delivered' };
  }
  const decided = rows.filter((r) => (r.metadata.status === 'answered' || r.metadata.status === 'rejected') && !isTruthyFlag(r.metadata.response_undelivered));
  if (decided.length === 0) return { replay: false, reason: 'the clarification is no longer active (expired, cancelled, or never delivered)' };
  const statuses = new Set(decided.map((r) => r.metadata.status as 'answered' | 'rejected'));
  if (statuses.size !== 1) return { replay: false, reason: 'the clarification holds both answered and rejected rows' };
  const [status] = [...statuses] as ['answered' | 'rejected'];
  if (status !== outcome.status) return { replay: false, reason: `the clarification was already ${status} by another response` };
  const respondedAt = decided
    .map((r) => r.updatedAt)
    .sort()
    .at(-1)!;
  if (outcome.status === 'rejected') {
    const reasons = new Set(decided.map((r) => (typeof r.metadata.reject_reason === 'string' ? r.metadata.reject_reason : '')));
    if (reasons.size !== 1 || !reasons.has(outcome.reason)) return { replay: false, reason: 'the clarification was already rejected with another reason' };
    return { replay: true, status, answers: [], rejectReason: outcome.reason, respondedAt };
  }
  const decidedIds = new Set(decided.map((r) => r.id));
  const answers: ClarificationAnswerPayload[] = [];
  for (const question of questions) {
    if (!decidedIds.has(question.messageId)) continue;
    const row = decided.find((r) => r.id === question.messageId)!;
    const recorded = storedAnswer(row.metadata, question.questionId);
    const requested = outcome.answers.find((a) => a.question_id === question.questionId);
    if (!recorded || !requested || !sameAnswer(recorded, requested)) {
      return { replay: false, reason: 'the clarification was already answered with a different response' };
    }
    answers.push(recorded);
  }
  return { replay: true, status, answers, rejectReason: '', respondedAt };
}
