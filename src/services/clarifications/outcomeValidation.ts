import { questionIdFromMetadata } from '../../turns/clarificationQuestionId.js';
import type { ClarificationAnswerPayload } from '../../contract/clarificationPayloads.js';
import { MAX_BUNDLE_QUESTIONS, type ParsedRespondRequest } from '../../contract/requests.js';

/**
 * Pure checks of a respond request against the bundle it names, run before any write: the bundle's
 * shape (a malformed bundle is a conflict, like the claim's own guard) and the outcome (a bad one is
 * a bad request). Question ids are read as the listing reads them: flat `question_id` first, nested
 * `question.id` as the fallback.
 */

/** The parts of a stored row these checks read. */
export interface BundleRow {
  id: string;
  type: string;
  sessionId: string;
  turnId: string;
  metadata: Record<string, unknown>;
}

export interface BundleQuestionView {
  messageId: string;
  questionId: string;
  /** Option ids in the question's own order. */
  optionIds: string[];
  /** Absent, JSON null, '' or 'pending' (the SQL pending test). */
  pending: boolean;
}

export type BundleInspection = { ok: true; questions: BundleQuestionView[] } | { ok: false; reason: string };

export type NormalizedOutcome = { status: 'answered'; answers: ClarificationAnswerPayload[] } | { status: 'rejected'; reason: string };

export type OutcomeValidation = { ok: true; outcome: NormalizedOutcome } | { ok: false; message: string };

export function isPendingStatus(metadata: Record<string, unknown>): boolean {
  const status = metadata.status;
  return status === undefined || status === null || status === '' || status === 'pending';
}

function optionIdsOf(question: unknown): string[] {
  if (!question || typeof question !== 'object' || Array.isArray(question)) return [];
  const options = (question as Record<string, unknown>).options;
  if (!Array.isArray(options)) return [];
  const ids: string[] = [];
  for (const option of options) {
    if (!option || typeof option !== 'object') continue;
    const { option_id: optionId, id } = option as Record<string, unknown>;
    const value = typeof optionId === 'string' && optionId !== '' ? optionId : typeof id === 'string' && id !== '' ? id : undefined;
    if (value !== undefined) ids.push(value);
  }
  return ids;
}

/** A row's place in its bundle (`question_index`); rows without one sort last. */
export function questionIndexOf(row: Pick<BundleRow, 'metadata'>): number {
  const index = row.metadata.question_index;
  return typeof index === 'number' && Number.isFinite(index) ? index : Number.MAX_SAFE_INTEGER;
}

/**
 * The bundle's questions in question order, or why the bundle cannot be answered: rows of another
 * type, rows spanning sessions or turns, more than four questions, or a row whose question id is
 * missing or repeated (the listing never offers such a bundle).
 */
export function inspectBundle(rows: readonly BundleRow[]): BundleInspection {
  if (rows.length === 0) return { ok: false, reason: 'the bundle has no questions' };
  const first = rows[0]!;
  if (rows.some((r) => r.type !== 'clarification_request'))
    return { ok: false, reason: 'the bundle id is shared with rows that are not clarification requests' };
  if (rows.some((r) => r.sessionId !== first.sessionId || r.turnId !== first.turnId)) {
    return { ok: false, reason: 'the bundle spans several sessions or turns' };
  }
  if (rows.length > MAX_BUNDLE_QUESTIONS) return { ok: false, reason: `the bundle has ${rows.length} questions (at most ${MAX_BUNDLE_QUESTIONS})` };
  const ordered = rows.map((row, position) => ({ row, position }));
  ordered.sort((a, b) => questionIndexOf(a.row) - questionIndexOf(b.row) || a.position - b.position);
  const questions: BundleQuestionView[] = [];
  const seen = new Set<string>();
  for (const { row } of ordered) {
    const questionId = questionIdFromMetadata(row.metadata);
    if (questionId === '') return { ok: false, reason: `question row ${row.id} has no question id` };
    if (seen.has(questionId)) return { ok: false, reason: `question id ${JSON.stringify(questionId)} appears twice in the bundle` };
    seen.add(questionId);
    questions.push({ messageId: row.id, questionId, optionIds: optionIdsOf(row.metadata.question), pending: isPendingStatus(row.metadata) });
  }
  return { ok: true, questions };
}

const quoteList = (values: readonly string[]) => values.map((v) => JSON.stringify(v)).join(', ');

/**
 * Validates an outcome against the bundle's questions and normalises it: answers in question order,
 * selected options de-duplicated and in the question's option order, texts trimmed. Answers must
 * cover every question of the bundle exactly once; option ids must be the question's own.
 */
export function validateOutcome(questions: readonly BundleQuestionView[], request: ParsedRespondRequest): OutcomeValidation {
  if (request.reject !== undefined) return { ok: true, outcome: { status: 'rejected', reason: request.reject.reason.trim() } };
  const answers = request.answers ?? [];
  const known = questions.map((q) => q.questionId);
  const byId = new Map(questions.map((q) => [q.questionId, q]));
  const given = new Map<string, (typeof answers)[number]>();
  for (const [i, answer] of answers.entries()) {
    const question = byId.get(answer.question_id);
    if (!question) {
      return {
        ok: false,
        message: `answer ${i + 1} names unknown question_id ${JSON.stringify(answer.question_id)}; the bundle's questions are ${quoteList(known)}`,
      };
    }
    if (given.has(answer.question_id)) return { ok: false, message: `answer ${i + 1} repeats question_id ${JSON.stringify(answer.question_id)}` };
    given.set(answer.question_id, answer);
    const unknown = answer.selected_options.find((o) => !question.optionIds.includes(o));
    if (unknown !== undefined) {
      return {
        ok: false,
        message: `answer ${i + 1} selects unknown option_id ${JSON.stringify(unknown)} for question ${JSON.stringify(answer.question_id)}; its options are ${quoteList(question.optionIds) || 'none'}`,
      };
    }
  }
  const missing = known.filter((q) => !given.has(q));
  if (missing.length > 0) {
    return { ok: false, message: `expected one answer per question (${quoteList(known)}); missing ${quoteList(missing)}` };
  }
  return {
    ok: true,
    outcome: {
      status: 'answered',
      answers: questions.map((q) => {
        const answer = given.get(q.questionId)!;
        const selected = new Set(answer.selected_options);
        return {
          question_id: q.questionId,
          selected_options: [...new Set(q.optionIds)].filter((o) => selected.has(o)),
          custom_text: answer.custom_text.trim(),
        };
      }),
    },
  };
}
