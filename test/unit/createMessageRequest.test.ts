import { describe, expect, it } from 'vitest';
import { createMessageRequestSchema } from '../support/createMessageRequest.js';

const minimal = { session_id: 'session-1', content: 'hello' };

describe('createMessageRequestSchema', () => {
  it.each([
    ['completed_turn', true],
    ['completedTurn', true],
    ['completed_turn', 'true'],
    ['completedTurn', 1],
  ])('drops %s=%j so no outside caller can ask for a lifecycle turn (AC-7)', (key, value) => {
    const parsed = createMessageRequestSchema.parse({ ...minimal, type: 'clarification_request', [key]: value });
    expect(parsed).not.toHaveProperty('completed_turn');
    expect(parsed).not.toHaveProperty('completedTurn');
    expect(parsed.type).toBe('clarification_request');
  });

  it('drops both spellings at once and keeps every declared field', () => {
    const parsed = createMessageRequestSchema.parse({
      session_id: 'session-1',
      turn_id: 'turn-1',
      author_type: 'agent',
      author_id: 'agent-7',
      content: 'Which option?',
      type: 'clarification_request',
      requests_input: true,
      metadata: { pending_id: 'p-1', question_id: 'q1' },
      completed_turn: true,
      completedTurn: true,
    });
    expect(parsed).toEqual({
      session_id: 'session-1',
      turn_id: 'turn-1',
      author_type: 'agent',
      author_id: 'agent-7',
      content: 'Which option?',
      type: 'clarification_request',
      requests_input: true,
      metadata: { pending_id: 'p-1', question_id: 'q1' },
    });
  });

  it('fills the defaults of a minimal user message', () => {
    expect(createMessageRequestSchema.parse(minimal)).toEqual({
      session_id: 'session-1',
      content: 'hello',
      author_type: 'user',
      author_id: '',
      type: 'message',
      requests_input: false,
      metadata: {},
    });
  });

  it('keeps a completed_turn key inside metadata as opaque message metadata, not as a request flag', () => {
    const parsed = createMessageRequestSchema.parse({ ...minimal, metadata: { completed_turn: true } });
    expect(parsed.metadata).toEqual({ completed_turn: true });
    expect(parsed).not.toHaveProperty('completed_turn');
  });

  it.each([
    ['a missing session id', { content: 'x' }],
    ['an empty session id', { session_id: '', content: 'x' }],
    ['an unknown author type', { ...minimal, author_type: 'system' }],
    ['a non-boolean requests_input', { ...minimal, requests_input: 'yes' }],
    ['metadata that is not an object', { ...minimal, metadata: ['a'] }],
  ])('rejects %s', (_label, body) => {
    expect(createMessageRequestSchema.safeParse(body).success).toBe(false);
  });
});
