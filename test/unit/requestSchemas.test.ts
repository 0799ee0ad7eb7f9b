import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { listPendingRequestSchema, respondRequestSchema, sessionRequestSchema, taskRequestSchema } from '../../src/contract/requests.js';
import { MAX_ID_LENGTH } from '../../src/storableText.js';

const answer = (fields: Record<string, unknown> = {}) => ({ question_id: 'q1', selected_options: ['a'], ...fields });

/** Each id field of each request, as a function from the id to a body that is valid otherwise. */
const idFields: Array<[string, z.ZodType, (id: string) => unknown]> = [
  ['task_id', taskRequestSchema, (id) => ({ task_id: id })],
  ['session_id', sessionRequestSchema, (id) => ({ session_id: id })],
  ['pending_id', respondRequestSchema, (id) => ({ pending_id: id, reject: {} })],
  ['question_id', respondRequestSchema, (id) => ({ pending_id: 'p', answers: [answer({ question_id: id })] })],
  ['selected_options[]', respondRequestSchema, (id) => ({ pending_id: 'p', answers: [answer({ selected_options: [id] })] })],
  ['workspace_id', listPendingRequestSchema, (id) => ({ workspace_id: id, limit: 10 })],
];

const badIds: Array<[string, string, RegExp]> = [
  ['a NUL byte', 'id\u0000', /NUL/],
  ['a lone high surrogate', 'id\ud800', /lone UTF-16 surrogate/],
  ['a lone low surrogate', '\udc00', /lone UTF-16 surrogate/],
  ['an id one longer than the limit', 'x'.repeat(MAX_ID_LENGTH + 1), /at most 256 characters/],
  ['a 10 KB id', 'x'.repeat(10 * 1024), /at most 256 characters/],
  ['an empty id', '', /must not be empty/],
];

describe('request schemas refuse ids either dialect cannot store, before any SQL', () => {
  describe.each(idFields)('%s', (_field, schema, body) => {
    it.each(badIds)('refuses %s', (_label, id, message) => {
      const parsed = schema.safeParse(body(id));
      expect(parsed.success).toBe(false);
      expect(z.prettifyError(parsed.error!)).toMatch(message);
    });

    it('accepts an id at the length limit, a UUID and non-ASCII text', () => {
      for (const id of ['x'.repeat(MAX_ID_LENGTH), '6f0c7a52-9d1e-4f0b-8c1a-2b3c4d5e6f70', 'frage-😀']) {
        expect(schema.safeParse(body(id)).success).toBe(true);
      }
    });
  });

  it.each([
    ['custom_text', (text: string) => ({ pending_id: 'p', answers: [answer({ custom_text: text })] })],
    ['a rejection reason', (text: string) => ({ pending_id: 'p', reject: { reason: text } })],
  ])('refuses NUL and lone surrogates in %s, which PostgreSQL stores in jsonb, and keeps other text', (_field, body) => {
    expect(respondRequestSchema.safeParse(body('use the staging\u0000 database')).success).toBe(false);
    expect(respondRequestSchema.safeParse(body('half an emoji \ud83d')).success).toBe(false);
    expect(respondRequestSchema.safeParse(body('use the staging database 😀, tab\there')).success).toBe(true);
  });

  it('still counts the answer text limit in code points, beside the character rule', () => {
    expect(respondRequestSchema.safeParse({ pending_id: 'p', reject: { reason: '😀'.repeat(2000) } }).success).toBe(true);
    const tooLong = respondRequestSchema.safeParse({ pending_id: 'p', reject: { reason: 'x'.repeat(2001) } });
    expect(z.prettifyError(tooLong.error!)).toMatch(/at most 2000 characters/);
  });
});
