import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseRequest } from '../../src/contract/parseRequest.js';
import { ENDPOINT_REQUEST_SCHEMAS } from '../../src/contract/endpoints.js';

const encoder = new TextEncoder();
const messageOf = (schema: z.ZodType, body: string): string => {
  const parsed = parseRequest(encoder.encode(body), schema, 1 << 20);
  if (parsed.ok) throw new Error('expected a bad_request');
  return parsed.reply.error.message;
};

describe('bad_request messages', () => {
  const schema = z.strictObject({
    task_id: z.string(),
    limit: z.number().int().optional(),
    kind: z.enum(['a', 'b']).optional(),
    answers: z.array(z.strictObject({ text: z.string() })).optional(),
  });

  it('say each problem as one plain sentence, field first, without zod’s symbols or line breaks', () => {
    expect(messageOf(schema, '{"task_id": 5}')).toBe('task_id: expected string, received number');
    expect(messageOf(schema, '{}')).toBe('task_id: required (expected string)');
    expect(messageOf(schema, '{"task_id": "t", "kind": "c", "extra": 1}')).toBe('kind: expected one of "a", "b"; unknown field "extra"');
    expect(messageOf(schema, '{"task_id": "t", "answers": [{"text": 1}]}')).toBe('answers[0].text: expected string, received number');
  });

  it('hold no ✖, → or newline for any endpoint schema given a body of wrong types', () => {
    for (const [name, endpointSchema] of Object.entries(ENDPOINT_REQUEST_SCHEMAS)) {
      const message = messageOf(endpointSchema as z.ZodType, '{"task_id": 5, "session_id": 5, "pending_id": 5}');
      expect(message, name).not.toMatch(/[✖→\n]/);
      expect(message, name).toMatch(/^[a-z_[\]0-9.]+: |^unknown field/);
    }
  });
});
