import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { previewOf } from '../../src/events/deadLetters.js';
import { parseEvent, type EventRejection } from '../../src/events/parseEvent.js';
import { relevanceOf } from '../../src/projectors/eventRelevance.js';
import { idProblem } from '../../src/storableText.js';
import { INVALID_UTF8, eventBytes, eventWithInvalidId, invalidIdString, objectText, withInvalidUtf8 } from '../support/fuzzInputs.js';

// The worker's default event limit, so huge strings and deep nesting reach the JSON and schema steps.
const MAX_EVENT_BYTES = 256 * 1024;
// Fixed, so the run's length is bounded. A failure prints its seed and path: pass them back to
// fc.assert to replay it. Shrinking inputs of tens of kilobytes takes minutes, so it is skipped.
const RUNS = 1000;
const REJECTIONS: readonly EventRejection[] = ['too_large', 'invalid_json', 'invalid_envelope', 'invalid_id'];
const encoder = new TextEncoder();

describe('the inbound envelope parser, fed arbitrary bytes', () => {
  it('classifies every input as a projectable event with storable ids, or a dead-letter reason, and never throws', () => {
    fc.assert(
      fc.property(eventBytes, (bytes) => {
        const parsed = parseEvent(bytes, MAX_EVENT_BYTES);
        if (parsed.ok) {
          for (const id of [parsed.data.task_id, parsed.data.session_id]) if (id !== undefined) expect(idProblem(id)).toBeUndefined();
          expect(['project', 'skip', 'unknown_type']).toContain(relevanceOf(parsed.envelope.type, parsed.data));
        } else {
          expect(REJECTIONS).toContain(parsed.reason);
          expect(typeof parsed.detail).toBe('string');
        }
        // What a dead-letter record keeps of the payload, whatever the bytes.
        expect(typeof JSON.stringify({ preview: previewOf(bytes) })).toBe('string');
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
  });

  it('dead-letters an id that is 10 KB long, holds a NUL or a lone surrogate as invalid_id, and a number or an object where an id belongs as invalid_envelope', () => {
    fc.assert(
      fc.property(eventWithInvalidId, ({ bytes }) => {
        const parsed = parseEvent(bytes, MAX_EVENT_BYTES);
        expect(parsed.ok).toBe(false);
        if (!parsed.ok) expect(['invalid_id', 'invalid_envelope']).toContain(parsed.reason);
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    fc.assert(
      fc.property(fc.constantFrom('task_id', 'session_id'), invalidIdString, (field, id) => {
        const bytes = encoder.encode(
          objectText([
            ['id', '"e"'],
            ['type', '"task.updated"'],
            ['data', objectText([[field, JSON.stringify(id)]])],
          ]),
        );
        expect(parseEvent(bytes, MAX_EVENT_BYTES)).toMatchObject({ ok: false, reason: 'invalid_id' });
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
  });

  it('dead-letters bytes that are not UTF-8 as invalid_json', () => {
    fc.assert(
      fc.property(fc.uuid(), fc.constantFrom(...INVALID_UTF8), (taskId, sequence) => {
        const text = objectText([
          ['id', '"e"'],
          ['type', '"task.updated"'],
          ['data', objectText([['task_id', JSON.stringify(taskId)]])],
        ]);
        expect(parseEvent(withInvalidUtf8(text, sequence), MAX_EVENT_BYTES)).toMatchObject({ ok: false, reason: 'invalid_json' });
      }),
      { numRuns: 200, endOnFailure: true },
    );
  });
});
