import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { REPLY_ERROR_CODES } from '../../src/contract/replyErrorCodes.js';
import { ENDPOINT_REQUEST_SCHEMAS } from '../../src/contract/endpoints.js';
import { parseRequest } from '../../src/contract/parseRequest.js';
import { idProblem, unstorableTextProblem } from '../../src/storableText.js';
import {
  INVALID_UTF8,
  bodyFor,
  fieldsOf,
  withInvalidUtf8,
  idFieldsIn,
  idPathsOf,
  stringPathsOf,
  invalidIdValue,
  objectText,
  pathLabel,
  requestBytes,
  stringsIn,
  textAtPath,
} from '../support/fuzzInputs.js';

// The worker's default request limit, so the huge strings and deep nesting below get past the
// size check and reach the JSON and schema steps.
const MAX_REQUEST_BYTES = 256 * 1024;
// Fixed, so the run's length is bounded. A failure prints its seed and path: pass them back to
// fc.assert to replay it. Inputs are up to tens of kilobytes, so shrinking is skipped
// (endOnFailure): it would take minutes.
const RUNS = 300;
const encoder = new TextEncoder();

/** Why `value`, a parsed request, holds something SQL must not see; undefined when it holds nothing of the kind. */
function unstorableIn(value: unknown): string | undefined {
  for (const [field, id] of idFieldsIn(value)) {
    const ids = Array.isArray(id) ? id : [id];
    for (const one of ids) {
      if (typeof one !== 'string') return `${field} is not a string: ${JSON.stringify(one)}`;
      const problem = idProblem(one);
      if (problem) return `${field} ${problem}`;
    }
  }
  for (const text of stringsIn(value)) {
    const problem = unstorableTextProblem(text);
    if (problem) return `a string ${problem}: ${JSON.stringify(text.slice(0, 40))}`;
  }
  return undefined;
}

// Walks the registry the worker serves from, so an endpoint added to it is fuzzed here too.
describe.each(Object.entries(ENDPOINT_REQUEST_SCHEMAS))('the request parser of %s', (_name, schema) => {
  const fields = fieldsOf(schema);

  it('answers any bytes with a request holding only storable ids and text, or a bad_request reply, and never throws', () => {
    fc.assert(
      fc.property(requestBytes(schema), (bytes) => {
        const parsed = parseRequest(bytes, schema, MAX_REQUEST_BYTES);
        if (parsed.ok) {
          expect(unstorableIn(parsed.request)).toBeUndefined();
        } else {
          expect(REPLY_ERROR_CODES).toContain(parsed.reply.error.code);
          expect(parsed.reply).toEqual({ ok: false, error: { code: 'bad_request', message: expect.any(String) } });
        }
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
  });

  it('refuses bytes that are not UTF-8 instead of replacing them', () => {
    fc.assert(
      fc.property(bodyFor(fields), fc.constantFrom(...INVALID_UTF8), (text, sequence) => {
        const parsed = parseRequest(withInvalidUtf8(text, sequence), schema, MAX_REQUEST_BYTES);
        expect(parsed).toMatchObject({ ok: false, reply: { error: { code: 'bad_request' } } });
      }),
      { numRuns: 100, endOnFailure: true },
    );
  });

  const idPaths = idPathsOf(schema);
  // Registered only for a body that has one: a schema without ids has nothing to refuse here.
  if (idPaths.length > 0)
    it('refuses, naming the field, an id that is 10 KB long, holds a NUL or a lone surrogate, or is not a string, wherever the body has one', () => {
      fc.assert(
        fc.property(fc.constantFrom(...idPaths), invalidIdValue, bodyFor(fields), (path, value, others) => {
          // The other fields are whatever bodyFor made; the id under test comes last, so it wins a duplicate key.
          const body = `${others.slice(0, -1)}${others === '{}' ? '' : ','}${textAtPath(path, value).slice(1)}`;
          fc.pre(body.length < MAX_REQUEST_BYTES / 2);
          const parsed = parseRequest(encoder.encode(body), schema, MAX_REQUEST_BYTES);
          expect(parsed.ok).toBe(false);
          if (!parsed.ok) expect(parsed.reply.error.message).toContain(pathLabel(path));
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    });

  const stringPaths = stringPathsOf(schema);
  if (stringPaths.length > 0)
    it('refuses, naming the field, a NUL or a lone surrogate in any of its strings, which one dialect would not store as sent', () => {
      fc.assert(
        fc.property(fc.constantFrom(...stringPaths), fc.constantFrom('\u0000', 'a\u0000', '\ud800', 'b\udfff'), bodyFor(fields), (path, text, others) => {
          const body = `${others.slice(0, -1)}${others === '{}' ? '' : ','}${textAtPath(path, JSON.stringify(text)).slice(1)}`;
          fc.pre(body.length < MAX_REQUEST_BYTES / 2);
          const parsed = parseRequest(encoder.encode(body), schema, MAX_REQUEST_BYTES);
          expect(parsed.ok).toBe(false);
          if (!parsed.ok) expect(parsed.reply.error.message).toContain(pathLabel(path));
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    });
});
