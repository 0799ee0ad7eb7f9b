import type { ClarificationDeliveryPayload } from '../../contract/clarificationPayloads.js';
import type { PrimaryAnsweredData } from '../../contract/kandevEvents.js';
import { questionIdFromMetadata } from '../../turns/clarificationQuestionId.js';
import { questionIndexOf } from './outcomeValidation.js';

/** The parts of a claimed question row the event text is read from. */
interface QuestionRow {
  content: string;
  metadata: Record<string, unknown>;
}

const record = (value: unknown): Record<string, unknown> =>
  value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

function promptOf(row: QuestionRow | undefined, questionId: string): string {
  const prompt = record(row?.metadata.question).prompt;
  if (typeof prompt === 'string' && prompt.trim() !== '') return prompt;
  return row?.content.trim() ? row.content : questionId;
}

function labelOf(row: QuestionRow | undefined, optionId: string): string {
  const options = record(row?.metadata.question).options;
  const option = Array.isArray(options) ? options.map(record).find((o) => o.option_id === optionId) : undefined;
  return typeof option?.label === 'string' && option.label !== '' ? option.label : optionId;
}

/**
 * Kandev's `clarification.primary_answered` data for a bundle delivered to its live waiter.
 * Kandev's orchestrator reads `answer_text` when its watchdog falls back to a resume, so the text
 * must stand alone: Kandev's event describes one question, and a bundle of several is written one
 * line per question (`prompt: answer`), in the bundle's order. An answer is its selected options'
 * labels, then its custom text, comma-separated.
 */
export function primaryAnsweredData(rows: readonly QuestionRow[], payload: ClarificationDeliveryPayload): PrimaryAnsweredData {
  const byQuestion = new Map(rows.map((row) => [questionIdFromMetadata(row.metadata), row]));
  const answers = payload.answers.map((answer) => {
    const row = byQuestion.get(answer.question_id);
    const parts = [...answer.selected_options.map((id) => labelOf(row, id)), answer.custom_text].filter((part) => part !== '');
    return { prompt: promptOf(row, answer.question_id), text: parts.join(', ') };
  });
  const questions = [...rows].sort((a, b) => questionIndexOf(a) - questionIndexOf(b)).map((row) => promptOf(row, questionIdFromMetadata(row.metadata)));
  return {
    session_id: payload.session_id,
    task_id: payload.task_id,
    pending_id: payload.pending_id,
    clarification_turn_id: payload.clarification_turn_id,
    question: questions.join('\n'),
    answer_text: answers.length === 1 ? answers[0]!.text : answers.map((a) => `${a.prompt}: ${a.text}`).join('\n'),
    rejected: payload.rejected,
    reject_reason: payload.reject_reason,
    status: payload.status,
  };
}
