import { describe, expect, it } from 'vitest';
import { inspectBundle, validateOutcome, type BundleRow, type NormalizedOutcome } from '../../src/services/clarifications/outcomeValidation.js';
import { recordedOutcome, type RecordedRow } from '../../src/services/clarifications/recordedOutcome.js';
import { respondRequestSchema } from '../../src/contract/requests.js';

function row(index: number, metadata: Record<string, unknown> = {}, extra: Partial<BundleRow> = {}): RecordedRow {
  const questionId = `q${index + 1}`;
  return {
    id: `m${index + 1}`,
    type: 'clarification_request',
    sessionId: 's1',
    turnId: 't1',
    updatedAt: `2026-01-01T00:00:0${index}.000000000Z`,
    metadata: {
      pending_id: 'p1',
      question_id: questionId,
      question: { id: questionId, prompt: '?', options: [{ option_id: 'a' }, { option_id: 'b' }, { option_id: 'c' }] },
      question_index: index,
      status: 'pending',
      ...metadata,
    },
    ...extra,
  };
}

const parse = (body: unknown) => respondRequestSchema.parse(body);
const questionsOf = (rows: BundleRow[]) => {
  const inspected = inspectBundle(rows);
  if (!inspected.ok) throw new Error(inspected.reason);
  return inspected.questions;
};

describe('respond request schema', () => {
  it('refuses a request with both answers and reject, or neither', () => {
    expect(respondRequestSchema.safeParse({ pending_id: 'p1' }).success).toBe(false);
    expect(respondRequestSchema.safeParse({ pending_id: 'p1', answers: [{ question_id: 'q1' }], reject: {} }).success).toBe(false);
  });

  it('refuses five answers and an empty answer list', () => {
    const five = Array.from({ length: 5 }, (_, i) => ({ question_id: `q${i}` }));
    const result = respondRequestSchema.safeParse({ pending_id: 'p1', answers: five });
    expect(result.success).toBe(false);
    expect(JSON.stringify(result.error?.issues)).toMatch(/at most 4 answers/);
    expect(respondRequestSchema.safeParse({ pending_id: 'p1', answers: [] }).success).toBe(false);
  });

  it('caps custom text at 2000 characters counted as code points', () => {
    const emoji = '😀'.repeat(2000);
    expect(respondRequestSchema.safeParse({ pending_id: 'p1', answers: [{ question_id: 'q1', custom_text: emoji }] }).success).toBe(true);
    expect(respondRequestSchema.safeParse({ pending_id: 'p1', answers: [{ question_id: 'q1', custom_text: `${emoji}x` }] }).success).toBe(false);
  });
});

describe('bundle inspection', () => {
  it('orders questions by question_index and accepts a nested-only question id', () => {
    const nested = row(0, { question_id: undefined });
    delete nested.metadata.question_id;
    const questions = questionsOf([row(1), nested]);
    expect(questions.map((q) => q.questionId)).toEqual(['q1', 'q2']);
    expect(questions[0]!.optionIds).toEqual(['a', 'b', 'c']);
  });

  it('calls a bundle malformed when it spans turns, mixes types, lacks or repeats a question id, or has five questions', () => {
    expect(inspectBundle([row(0), row(1, {}, { turnId: 't2' })])).toMatchObject({ ok: false, reason: expect.stringMatching(/sessions or turns/) });
    expect(inspectBundle([row(0), row(1, {}, { type: 'permission_request' })])).toMatchObject({ ok: false });
    expect(inspectBundle([row(0, { question_id: '', question: { prompt: '?' } })])).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/no question id/),
    });
    expect(inspectBundle([row(0), row(1, { question_id: 'q1' })])).toMatchObject({ ok: false, reason: expect.stringMatching(/twice/) });
    expect(inspectBundle([0, 1, 2, 3, 4].map((i) => row(i)))).toMatchObject({ ok: false, reason: expect.stringMatching(/5 questions/) });
  });

  it('reads absent, null, empty and "pending" statuses as pending, like the SQL test', () => {
    const statuses = [undefined, null, '', 'pending', 'answered', 'expired'];
    const rows = statuses.map((status, i) => row(i % 4, { status, question_id: `x${i}` }));
    expect(rows.map((r) => inspectBundle([r]).ok && questionsOf([r])[0]!.pending)).toEqual([true, true, true, true, false, false]);
  });
});

describe('outcome validation', () => {
  const questions = questionsOf([row(0), row(1)]);

  it('normalises answers into question order, option order, de-duplicated and trimmed', () => {
    const result = validateOutcome(
      questions,
      parse({
        pending_id: 'p1',
        answers: [
          { question_id: 'q2', selected_options: ['c', 'a', 'c'], custom_text: '  why  ' },
          { question_id: 'q1', selected_options: ['b'] },
        ],
      }),
    );
    expect(result).toEqual({
      ok: true,
      outcome: {
        status: 'answered',
        answers: [
          { question_id: 'q1', selected_options: ['b'], custom_text: '' },
          { question_id: 'q2', selected_options: ['a', 'c'], custom_text: 'why' },
        ],
      },
    });
  });

  it('names the unknown option id and the question it was offered for', () => {
    const result = validateOutcome(questions, parse({ pending_id: 'p1', answers: [{ question_id: 'q1', selected_options: ['z'] }, { question_id: 'q2' }] }));
    expect(result).toEqual({ ok: false, message: 'answer 1 selects unknown option_id "z" for question "q1"; its options are "a", "b", "c"' });
  });

  it('refuses an unknown question id, a repeated one and a missing answer', () => {
    expect(validateOutcome(questions, parse({ pending_id: 'p1', answers: [{ question_id: 'q9' }, { question_id: 'q2' }] }))).toMatchObject({
      ok: false,
      message: expect.stringMatching(/unknown question_id "q9"; the bundle's questions are "q1", "q2"/),
    });
    expect(validateOutcome(questions, parse({ pending_id: 'p1', answers: [{ question_id: 'q1' }, { question_id: 'q1' }] }))).toMatchObject({
      ok: false,
      message: expect.stringMatching(/repeats question_id "q1"/),
    });
    expect(validateOutcome(questions, parse({ pending_id: 'p1', answers: [{ question_id: 'q1' }] }))).toMatchObject({
      ok: false,
      message: expect.stringMatching(/missing "q2"/),
    });
  });

  it('accepts a rejection with a trimmed reason', () => {
    expect(validateOutcome(questions, parse({ pending_id: 'p1', reject: { reason: ' not now ' } }))).toEqual({
      ok: true,
      outcome: { status: 'rejected', reason: 'not now' },
    });
  });
});

describe('recorded outcome after a lost claim', () => {
  const answered = (i: number, selected: string[], extra: Record<string, unknown> = {}) =>
    row(i, { status: 'answered', response: { question_id: `q${i + 1}`, selected_options: selected, custom_text: '' }, ...extra });
  const outcome = (selected1: string[], selected2: string[]): NormalizedOutcome => ({
    status: 'answered',
    answers: [
      { question_id: 'q1', selected_options: selected1, custom_text: '' },
      { question_id: 'q2', selected_options: selected2, custom_text: '' },
    ],
  });

  it('replays the recorded answers to a retry of the same outcome', () => {
    const rows = [answered(0, ['a']), answered(1, ['b', 'c'])];
    const result = recordedOutcome(rows, questionsOf(rows), outcome(['a'], ['c', 'b']));
    expect(result).toMatchObject({ replay: true, status: 'answered', respondedAt: rows[1]!.updatedAt });
    expect(result.replay && result.answers.map((a) => a.selected_options)).toEqual([['a'], ['b', 'c']]);
  });

  it('is a conflict for a different outcome, a delivery in flight, an undelivered claim or a still-pending bundle', () => {
    const rows = [answered(0, ['a']), answered(1, ['b'])];
    expect(recordedOutcome(rows, questionsOf(rows), outcome(['a'], ['c']))).toMatchObject({
      replay: false,
      reason: expect.stringMatching(/different response/),
    });
    expect(recordedOutcome(rows, questionsOf(rows), { status: 'rejected', reason: '' })).toMatchObject({
      replay: false,
      reason: expect.stringMatching(/already answered/),
    });
    const inFlight = [answered(0, ['a'], { response_delivery_pending: true }), answered(1, ['b'], { response_delivery_pending: true })];
    expect(recordedOutcome(inFlight, questionsOf(inFlight), outcome(['a'], ['b']))).toMatchObject({
      replay: false,
      reason: expect.stringMatching(/being delivered/),
    });
    const undelivered = [answered(0, ['a'], { response_undelivered: true }), answered(1, ['b'], { response_undelivered: true })];
    expect(recordedOutcome(undelivered, questionsOf(undelivered), outcome(['a'], ['b']))).toMatchObject({ replay: false });
    const pending = [row(0), row(1)];
    expect(recordedOutcome(pending, questionsOf(pending), outcome(['a'], ['b']))).toMatchObject({
      replay: false,
      reason: expect.stringMatching(/no longer active/),
    });
  });

  it('compares only the rows the winning claim decided in a mixed bundle', () => {
    const rows = [row(0, { status: 'expired' }), answered(1, ['b'])];
    const result = recordedOutcome(rows, questionsOf(rows), outcome(['c'], ['b']));
    expect(result).toMatchObject({ replay: true, answers: [{ question_id: 'q2', selected_options: ['b'] }] });
  });

  it('replays a rejection only for the same reason', () => {
    const rows = [row(0, { status: 'rejected', reject_reason: 'no' })];
    expect(recordedOutcome(rows, questionsOf(rows), { status: 'rejected', reason: 'no' })).toMatchObject({ replay: true, status: 'rejected' });
    expect(recordedOutcome(rows, questionsOf(rows), { status: 'rejected', reason: 'other' })).toMatchObject({ replay: false });
  });
});
