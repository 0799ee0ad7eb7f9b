import { describe, expect, it } from 'vitest';
import { busFitProblem, HEADER_BYTES, JSON_ESCAPE_FACTOR, largestMessages, type LargestMessage } from '../../src/contract/busLimits.js';
import { SETTINGS } from '../../src/config.js';
import { PLAN_COMMENT_LIMITS } from '../../src/turns/index.js';

const MiB = 1024 * 1024;
const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');
const budgetOf = (messages: LargestMessage[], word: string) => messages.find((m) => m.what.includes(word))!.bytes;

describe('the bus is sized for the largest message the limits allow, JSON-escaped at worst', () => {
  const messages = largestMessages({ queueMaxPerSession: 10 });

  it('escapes no byte of text into more than six', () => {
    for (const char of ['\u0001', '"', '\\', '\n', '<', 'é', '€', '🚀']) {
      expect(bytesOf(char) - 2).toBeLessThanOrEqual(JSON_ESCAPE_FACTOR * Buffer.byteLength(char));
    }
    expect(bytesOf('\u0001') - 2).toBe(JSON_ESCAPE_FACTOR);
  });

  it('holds a message.send of a 1 MiB prompt of control characters, and its envelope as the agent gets it', () => {
    const content = '\u0001'.repeat(PLAN_COMMENT_LIMITS.promptMaxBytes);
    const refs = Array.from({ length: PLAN_COMMENT_LIMITS.refsPerPrompt }, (_, i) => ({ id: `c-${i}-${'x'.repeat(200)}`, version: 1 }));
    const request = {
      session_id: 's'.repeat(256),
      caller_id: 'c'.repeat(128),
      content,
      plan_comment_refs: refs,
      attachment_ids: Array(20).fill('a'.repeat(256)),
    };
    const envelope = {
      id: 'e',
      type: 'session.prompt',
      source: 'pending-projector',
      timestamp: new Date().toISOString(),
      data: { ...request, prompt: content },
    };
    expect(bytesOf(request)).toBeLessThanOrEqual(budgetOf(messages, 'a prompt'));
    expect(bytesOf({ ...envelope, data: { ...envelope.data, content: undefined } })).toBeLessThanOrEqual(budgetOf(messages, 'a prompt'));
  });

  it("holds a full collection: 100 comments, 1 MiB of bodies and selections of control characters, ids of Kandev's length", () => {
    const { commentsPerPlan, planTextMaxBytes } = PLAN_COMMENT_LIMITS;
    const each = planTextMaxBytes / commentsPerPlan;
    const comments = Array.from({ length: commentsPerPlan }, (_, i) => ({
      id: `6f0c7a52-9d1e-4f0b-8c1a-2b3c4d5e${String(i).padStart(4, '0')}`,
      task_id: '6f0c7a52-9d1e-4f0b-8c1a-2b3c4d5e6f70',
      plan_id: '6f0c7a52-9d1e-4f0b-8c1a-2b3c4d5e6f71',
      body: '"'.repeat(Math.floor(each / 2)),
      selected_text: '\u0001'.repeat(Math.ceil(each / 2)),
      anchor_from: Number.MAX_SAFE_INTEGER,
      anchor_to: Number.MAX_SAFE_INTEGER,
      version: Number.MAX_SAFE_INTEGER,
      created_at: '2026-12-04T20:00:00.123456789Z',
      updated_at: '2026-12-04T20:00:00.123456789Z',
    }));
    const event = {
      id: 'e',
      type: 'task_plan.comments.changed',
      source: 'pending-projector',
      timestamp: '2026-12-04T20:00:00Z',
      data: { task_id: 't', plan_id: 'p', revision: 1, comments },
    };
    expect(bytesOf(event)).toBeLessThanOrEqual(budgetOf(messages, "a plan's"));
  });

  it('fits the defaults: MAX_EVENT_BYTES above every largest message, and both within 8 MiB with headers', () => {
    const maxEventBytes = SETTINGS.maxEventBytes.default;
    for (const m of messages) expect(m.bytes, m.what).toBeLessThanOrEqual(maxEventBytes);
    expect(maxEventBytes + HEADER_BYTES).toBeLessThanOrEqual(8 * MiB);
    expect(busFitProblem({ maxPayload: 8 * MiB, maxEventBytes, queueMaxPerSession: SETTINGS.queueMaxPerSession.default })).toBeUndefined();
  });

  it('refuses a max_payload one byte below what it needs, and takes exactly that', () => {
    const settings = { maxEventBytes: 7 * MiB, queueMaxPerSession: 10 };
    const need = 7 * MiB + HEADER_BYTES;
    expect(busFitProblem({ maxPayload: need, ...settings })).toBeUndefined();
    expect(busFitProblem({ maxPayload: need - 1, ...settings })).toMatch(
      /max_payload is 7344127 bytes; the worker needs at least 7344128 for MAX_EVENT_BYTES=7340032/,
    );
  });
});
