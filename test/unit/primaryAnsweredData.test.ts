import { describe, expect, it } from 'vitest';
import type { ClarificationDeliveryPayload } from '../../src/contract/clarificationPayloads.js';
import { primaryAnsweredData } from '../../src/services/clarifications/primaryAnsweredData.js';

const row = (id: string, index: number, extra: Record<string, unknown> = {}) => ({
  content: `content of ${id}`,
  metadata: {
    question_id: id,
    question_index: index,
    question: {
      id,
      prompt: `${id}?`,
      options: [
        { option_id: 'yes', label: 'Yes' },
        { option_id: 'no', label: 'No' },
      ],
    },
    ...extra,
  },
});

const payload = (overrides: Partial<ClarificationDeliveryPayload>): ClarificationDeliveryPayload => ({
  pending_id: 'p1',
  claim_id: 'c1',
  session_id: 's1',
  task_id: 'task-1',
  clarification_turn_id: 't1',
  status: 'answered',
  answers: [],
  rejected: false,
  reject_reason: '',
  responded_at: '2026-12-04T00:00:00Z',
  ...overrides,
});

describe('clarification.primary_answered data', () => {
  it("carries Kandev's fields for a single answered question: its prompt and the chosen labels then the custom text", () => {
    const data = primaryAnsweredData([row('q1', 0)], payload({ answers: [{ question_id: 'q1', selected_options: ['no'], custom_text: 'not yet' }] }));
    expect(data).toEqual({
      session_id: 's1',
      task_id: 'task-1',
      pending_id: 'p1',
      clarification_turn_id: 't1',
      question: 'q1?',
      answer_text: 'No, not yet',
      rejected: false,
      reject_reason: '',
      status: 'answered',
    });
  });

  it('writes a bundle one line per question in question order, whatever the row order', () => {
    const data = primaryAnsweredData(
      [row('q2', 1), row('q1', 0)],
      payload({
        answers: [
          { question_id: 'q1', selected_options: ['yes'], custom_text: '' },
          { question_id: 'q2', selected_options: [], custom_text: 'use the staging database' },
        ],
      }),
    );
    expect(data.question).toBe('q1?\nq2?');
    expect(data.answer_text).toBe('q1?: Yes\nq2?: use the staging database');
  });

  it('falls back to the row content, then the question id, and to option ids when metadata has no prompt or label', () => {
    const bare = { content: 'Which branch?', metadata: { question_id: 'q1', question: { options: [{ option_id: 'main' }] } } };
    const data = primaryAnsweredData([bare], payload({ answers: [{ question_id: 'q1', selected_options: ['main'], custom_text: '' }] }));
    expect([data.question, data.answer_text]).toEqual(['Which branch?', 'main']);
    const empty = { content: '  ', metadata: { question_id: 'q9', question: 'not an object' } };
    expect(primaryAnsweredData([empty], payload({ answers: [{ question_id: 'q9', selected_options: [], custom_text: 'x' }] })).question).toBe('q9');
  });

  it('says rejected with the reason and no answer text for a rejection', () => {
    const data = primaryAnsweredData([row('q1', 0), row('q2', 1)], payload({ status: 'rejected', rejected: true, reject_reason: 'wrong task' }));
    expect(data).toMatchObject({ question: 'q1?\nq2?', answer_text: '', rejected: true, reject_reason: 'wrong task', status: 'rejected' });
  });
});
