import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  importLegacySchema,
  messageSendSchema,
  planCommentCreateSchema,
  planCommentRunSchema,
  planCommentUpdateSchema,
  queueEnqueueSchema,
  queueUpdateSchema,
} from '../../src/contract/planCommentRequests.js';
import { parseRequest } from '../../src/contract/parseRequest.js';
import { expandPrompt } from '../../src/repository/prompts/promptExpansion.js';
import { formatPlanCommentPrompt, PLAN_COMMENT_LIMITS, planCommentTextBytes, utf8Length } from '../../src/turns/index.js';

/** Text of exactly `bytes` UTF-8 bytes, mostly three-byte characters, so a count of characters or code units would be wrong. */
function textOfBytes(bytes: number): string {
  const text = '€'.repeat(Math.floor(bytes / 3)) + 'x'.repeat(bytes % 3);
  expect(Buffer.byteLength(text, 'utf8')).toBe(bytes);
  return text;
}

const encode = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));
// Large enough for any body below: the field's own limit answers, not the request's.
const REQUEST_MAX_BYTES = 16 * 1024 * 1024;

function refusal(schema: z.ZodType, body: unknown): string | undefined {
  const parsed = parseRequest(encode(body), schema, REQUEST_MAX_BYTES);
  if (parsed.ok) return undefined;
  expect(parsed.reply.error.code).toBe('bad_request');
  return parsed.reply.error.message;
}

const { bodyMaxBytes, selectedTextMaxBytes, promptMaxBytes } = PLAN_COMMENT_LIMITS;
const ids = { task_id: 't', plan_id: 'p', comment_id: 'c' };

/** Each limited field: its schema, a body holding `text` in it, the limit, and how the refusal names it. */
const fields: Array<[string, z.ZodType, (text: string) => unknown, number, RegExp]> = [
  ['plan_comment.create body', planCommentCreateSchema, (body) => ({ ...ids, body }), bodyMaxBytes, /body must hold 1 to 65536 bytes \(UTF-8\) after trimming/],
  ['plan_comment.update body', planCommentUpdateSchema, (body) => ({ ...ids, version: 1, body }), bodyMaxBytes, /body must hold 1 to 65536 bytes/],
  [
    'plan_comment.create selected_text',
    planCommentCreateSchema,
    (selected_text) => ({ ...ids, body: 'b', selected_text }),
    selectedTextMaxBytes,
    /selected_text must be at most 262144 bytes \(UTF-8\)/,
  ],
  [
    'plan_comment.import_legacy text',
    importLegacySchema,
    (text) => ({ task_id: 't', drafts: [{ id: 'd', sessionId: 's', text, createdAt: '2026-09-02T10:00:00Z' }] }),
    bodyMaxBytes,
    /text must be at most 65536 bytes/,
  ],
  [
    'plan_comment.import_legacy selectedText',
    importLegacySchema,
    (selectedText) => ({ task_id: 't', drafts: [{ id: 'd', sessionId: 's', text: 'b', selectedText, createdAt: '2026-09-02T10:00:00Z' }] }),
    selectedTextMaxBytes,
    /selected_text must be at most 262144 bytes/,
  ],
  [
    'message.send content',
    messageSendSchema,
    (content) => ({ session_id: 's', caller_id: 'c1', content }),
    promptMaxBytes,
    /content must be at most 1048576 bytes/,
  ],
  [
    'queue.enqueue content',
    queueEnqueueSchema,
    (content) => ({ session_id: 's', caller_id: 'c1', content }),
    promptMaxBytes,
    /content must be at most 1048576 bytes/,
  ],
  [
    'queue.update content',
    queueUpdateSchema,
    (content) => ({ session_id: 's', queue_id: 'q', version: 1, content }),
    promptMaxBytes,
    /content must be at most 1048576/,
  ],
  [
    'plan_comment.run content',
    planCommentRunSchema,
    (content) => ({ task_id: 't', caller_id: 'c1', plan_comment_refs: [{ id: 'c', version: 1 }], content }),
    promptMaxBytes,
    /content must be at most 1048576 bytes/,
  ],
];

describe("Kandev's size limits, in UTF-8 bytes", () => {
  it('are 64 KiB per body, 256 KiB per selection, 100 comments and 1 MiB of text per plan, 1 MiB per prompt', () => {
    expect(PLAN_COMMENT_LIMITS).toMatchObject({
      bodyMaxBytes: 65536,
      selectedTextMaxBytes: 262144,
      commentsPerPlan: 100,
      planTextMaxBytes: 1048576,
      promptMaxBytes: 1048576,
    });
  });

  describe.each(fields)('%s', (_name, schema, body, limit, named) => {
    it('accepts text of exactly the limit', () => {
      expect(refusal(schema, body(textOfBytes(limit)))).toBeUndefined();
    });

    it('refuses one byte over with bad_request naming the limit', () => {
      expect(refusal(schema, body(textOfBytes(limit + 1)))).toMatch(named);
    });
  });

  it('counts a body after trimming, as before', () => {
    expect(refusal(planCommentCreateSchema, { ...ids, body: `  ${textOfBytes(bodyMaxBytes)}\n` })).toBeUndefined();
    expect(refusal(planCommentCreateSchema, { ...ids, body: ' \n ' })).toMatch(/body must hold 1 to/);
  });

  it("counts a comment's text against the plan as its body and selected text together", () => {
    expect(planCommentTextBytes({ body: 'é', selected_text: '🚀' })).toBe(6);
    expect(utf8Length('€'.repeat(10))).toBe(30);
  });

  it('expands a prompt of exactly 1 MiB and refuses one byte more with bad_request prompt_too_large naming the limit', () => {
    const comment = { id: 'c', body: textOfBytes(bodyMaxBytes), selectedText: textOfBytes(selectedTextMaxBytes), createdAt: '2026-09-02T10:00:00Z' };
    const around = utf8Length(formatPlanCommentPrompt([{ ...comment, selected_text: comment.selectedText, created_at: comment.createdAt }], 'x')) - 1;
    const content = (bytes: number) => textOfBytes(bytes - around);
    expect(expandPrompt([comment], content(promptMaxBytes))).toEqual({ prompt: expect.any(String) });
    expect(utf8Length((expandPrompt([comment], content(promptMaxBytes)) as { prompt: string }).prompt)).toBe(promptMaxBytes);
    expect(expandPrompt([comment], content(promptMaxBytes + 1))).toMatchObject({
      ok: false,
      code: 'bad_request',
      reason: 'prompt_too_large',
      message: 'the expanded prompt is over 1048576 bytes',
    });
  });
});
