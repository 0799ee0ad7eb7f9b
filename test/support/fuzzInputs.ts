import fc from 'fast-check';
import type { z } from 'zod';
import { MAX_ID_LENGTH } from '../../src/storableText.js';

/**
 * fast-check arbitraries of hostile input for the worker's parsers: request bodies and event
 * envelopes as the bytes a caller puts on the bus. JSON is built as text, not through
 * JSON.stringify of objects, so it can carry what JavaScript objects cannot: `__proto__` as an own
 * key, duplicate keys, nesting deeper than a recursive serialiser survives.
 */

/** A JSON value as its text. */
export type JsonText = string;

const encoder = new TextEncoder();

/** Names an id field (`task_id`, `attachment_ids`, `sessionId`, `id`): the fields bound into SQL as ids. */
const ID_FIELD = /(^id$|_id$|_ids$|Id$)/;

/** Keys that mean something to JavaScript objects, sent as plain data. */
const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];

/** Ids both dialects store: what a caller would normally send. */
const plausibleId = fc.oneof(fc.uuid(), fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/));

/**
 * Ids that are valid yet hostile: SQL and format-string text, wide and invisible characters,
 * exactly MAX_ID_LENGTH long. Bound as parameters, they must find nothing and break nothing.
 */
const hostileValidId = fc.oneof(
  plausibleId,
  fc.constantFrom(
    "'; DROP TABLE tasks; --",
    '" OR 1=1 --',
    '😀',
    'a'.repeat(MAX_ID_LENGTH),
    '${x}',
    '%s%n',
    '%00',
    '\\u0000',
    '\u2028',
    '\u200b',
    'b64.x',
    '*',
    '>',
    'a.b.c',
    ' ',
  ),
  fc.string({ minLength: 1, maxLength: 40 }),
);

/** Strings no id may be: too long (up to 10 KB), with a NUL, with a lone surrogate, or empty. */
export const invalidIdString = fc.oneof(
  fc.integer({ min: MAX_ID_LENGTH + 1, max: 10 * 1024 }).map((n) => 'i'.repeat(n)),
  plausibleId.map((id) => `${id}\u0000`),
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\udc00\ud800', ''),
);

/** Values that are no id at all: numbers, objects, arrays, booleans, null. */
const nonStringIdValue: fc.Arbitrary<JsonText> = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.constantFrom('null', 'true', 'false', '{}', '[]', '{"id":"x"}', '["x"]', '{"__proto__":{"length":1}}', '1e400', '-0'),
);

/** Anything but an id, as JSON text. */
export const invalidIdValue: fc.Arbitrary<JsonText> = fc.oneof(
  invalidIdString.map((s) => JSON.stringify(s)),
  nonStringIdValue,
);

/** Strings that are hard on a parser or a database: huge, NUL bytes, lone surrogates, control and wide characters. */
const hostileString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 64 }),
  // Huge, yet under the request limit even when a body holds several.
  fc.integer({ min: 1024, max: 64 * 1024 }).map((n) => 'h'.repeat(n)),
  fc.constantFrom(
    '\u0000',
    '\u0000\u0000',
    '\ud83d',
    '\ude00',
    '😀',
    '\u2028\u2029',
    '\u001b[31m',
    '%00',
    '\\u0000',
    "'; DROP TABLE tasks; --",
    '${x}',
    'a'.repeat(MAX_ID_LENGTH),
    'a'.repeat(MAX_ID_LENGTH + 1),
  ),
  invalidIdString,
  plausibleId,
);

const scalarText: fc.Arbitrary<JsonText> = fc.oneof(
  hostileString.map((s) => JSON.stringify(s)),
  nonStringIdValue,
  fc.integer({ min: -5, max: 5000 }).map(String),
);

/** Any JSON value, with hostile keys and strings, a few levels deep. */
const hostileJson: fc.Arbitrary<JsonText> = fc.letrec<{ value: JsonText }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalarText,
    fc.array(tie('value'), { maxLength: 5 }).map((items) => `[${items.join(',')}]`),
    fc.array(fc.tuple(fc.oneof(fc.constantFrom(...PROTOTYPE_KEYS), fc.string({ maxLength: 8 })), tie('value')), { maxLength: 5 }).map(objectText),
  ),
})).value;

/** Nesting far deeper than any body needs: arrays or objects, up to 20,000 levels. */
const deeplyNested: fc.Arbitrary<JsonText> = fc
  .tuple(fc.integer({ min: 100, max: 20_000 }), fc.boolean())
  .map(([depth, arrays]) => (arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

/** `{"k": v, ...}` from entries, keeping duplicates and `__proto__` as they are. */
export function objectText(entries: ReadonlyArray<readonly [string, JsonText]>): JsonText {
  return `{${entries.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(',')}}`;
}

/**
 * Byte sequences that are not UTF-8: a stray continuation byte, an overlong NUL, an encoded
 * surrogate, a truncated sequence, bytes UTF-8 never uses. Spliced into JSON text, inside a string.
 */
export const INVALID_UTF8: readonly number[][] = [[0x80], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xff], [0xfe, 0xff], [0xf8, 0x88, 0x80, 0x80, 0x80]];

/** `text` as UTF-8 with one invalid sequence inside its first string literal (or at its end). */
export function withInvalidUtf8(text: JsonText, sequence: readonly number[]): Uint8Array {
  const bytes = encoder.encode(text);
  const quote = bytes.indexOf(0x22);
  const at = quote === -1 ? bytes.length : quote + 1;
  return new Uint8Array([...bytes.subarray(0, at), ...sequence, ...bytes.subarray(at)]);
}

/** The top-level field names of an object schema (none for other schemas). */
export function fieldsOf(schema: z.ZodType): string[] {
  const shape = (schema as unknown as { shape?: Record<string, unknown> }).shape;
  return shape ? Object.keys(shape) : [];
}

/**
 * A value for the field `name`: mostly what a caller would send there (a plausible id in an id
 * field, a plausible id array in an id-list field), otherwise anything at all.
 */
function fieldValue(name: string): fc.Arbitrary<JsonText> {
  const plausible = name.endsWith('_ids')
    ? fc.array(plausibleId, { maxLength: 3 }).map((ids) => JSON.stringify(ids))
    : plausibleId.map((s) => JSON.stringify(s));
  return fc.oneof({ arbitrary: plausible, weight: 2 }, { arbitrary: hostileJson, weight: 3 }, { arbitrary: invalidIdValue, weight: 1 });
}

/**
 * Bodies aimed at an object schema: some of its own fields (plausible or hostile values), plus
 * prototype keys and strangers, sometimes duplicated.
 */
export function bodyFor(fields: readonly string[]): fc.Arbitrary<JsonText> {
  const own = fields.length > 0 ? fc.constantFrom(...fields) : fc.constant('task_id');
  const entry = fc.oneof(
    { arbitrary: own.chain((name) => fieldValue(name).map((value) => [name, value] as const)), weight: 4 },
    { arbitrary: fc.tuple(fc.constantFrom(...PROTOTYPE_KEYS), hostileJson), weight: 1 },
    { arbitrary: fc.tuple(fc.string({ maxLength: 12 }), hostileJson), weight: 1 },
  );
  return fc.array(entry, { minLength: 0, maxLength: fields.length + 3 }).map(objectText);
}

/**
 * The bytes of anything a caller might send to an endpoint with `schema`: bodies of its shape with
 * hostile but valid values, bodies aimed at its fields, any JSON value, deep nesting, text that is
 * not JSON, bytes that are not UTF-8.
 */
export function requestBytes(schema: z.ZodType): fc.Arbitrary<Uint8Array> {
  const fields = fieldsOf(schema);
  const text = fc.oneof(
    { arbitrary: plausibleBodyOf(schema), weight: 4 },
    { arbitrary: bodyFor(fields), weight: 6 },
    { arbitrary: hostileJson, weight: 2 },
    { arbitrary: deeplyNested, weight: 1 },
    { arbitrary: fc.string({ maxLength: 40 }), weight: 1 },
  );
  return fc.oneof(
    { arbitrary: text.map((t) => encoder.encode(t)), weight: 8 },
    { arbitrary: fc.tuple(bodyFor(fields), fc.constantFrom(...INVALID_UTF8)).map(([t, seq]) => withInvalidUtf8(t, seq)), weight: 2 },
    { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
  );
}

/** The envelope's fields and the `data` fields the worker reads. */
const ENVELOPE_FIELDS = ['id', 'type', 'subject', 'source', 'timestamp', 'data'];
const DATA_FIELDS = ['task_id', 'session_id', 'type', 'requests_input'];

/** A `data` object: the fields the worker reads (plausible or hostile) and strangers. */
const plausibleData: fc.Arbitrary<JsonText> = fc
  .tuple(
    fc.option(hostileValidId, { nil: undefined }),
    fc.option(hostileValidId, { nil: undefined }),
    fc.option(fc.constantFrom('clarification_request', 'permission_request', 'message'), { nil: undefined }),
  )
  .map(([taskId, sessionId, type]) =>
    objectText([
      ...(taskId === undefined ? [] : [['task_id', JSON.stringify(taskId)] as const]),
      ...(sessionId === undefined ? [] : [['session_id', JSON.stringify(sessionId)] as const]),
      ...(type === undefined ? [] : [['type', JSON.stringify(type)] as const]),
    ]),
  );
const eventData: fc.Arbitrary<JsonText> = fc.oneof(
  { arbitrary: plausibleData, weight: 5 },
  { arbitrary: bodyFor(DATA_FIELDS), weight: 5 },
  { arbitrary: hostileJson, weight: 1 },
  { arbitrary: deeplyNested, weight: 1 },
);

/** A well-formed envelope (plus strangers and prototype keys), its `data` anything from plausible to hostile. */
const envelopeText: fc.Arbitrary<JsonText> = fc
  .tuple(
    plausibleId,
    fc.constantFrom('task.updated', 'message.added', 'message.updated', 'turn.started'),
    eventData,
    fc.array(fc.tuple(fc.constantFrom(...PROTOTYPE_KEYS, 'x-extra'), hostileJson), { maxLength: 3 }),
  )
  .map(([id, type, data, extra]) => objectText([['id', JSON.stringify(id)], ['type', JSON.stringify(type)], ['data', data], ...extra]));

/** The bytes of anything a publisher might put on an inbound subject. */
export const eventBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  { arbitrary: envelopeText.map((t) => encoder.encode(t)), weight: 6 },
  { arbitrary: bodyFor(ENVELOPE_FIELDS).map((t) => encoder.encode(t)), weight: 2 },
  { arbitrary: fc.oneof(hostileJson, deeplyNested).map((t) => encoder.encode(t)), weight: 1 },
  { arbitrary: fc.tuple(envelopeText, fc.constantFrom(...INVALID_UTF8)).map(([t, seq]) => withInvalidUtf8(t, seq)), weight: 2 },
  { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
);

/** An envelope whose `data.task_id` or `data.session_id` is anything but an id. */
export const eventWithInvalidId: fc.Arbitrary<{ field: string; bytes: Uint8Array }> = fc
  .tuple(fc.constantFrom('task_id', 'session_id'), invalidIdValue)
  .map(([field, value]) => ({
    field,
    bytes: encoder.encode(
      objectText([
        ['id', '"e"'],
        ['type', '"task.updated"'],
        ['data', objectText([[field, value]])],
      ]),
    ),
  }));

/** Every string in a parsed value, keys included, however deep. */
export function stringsIn(value: unknown, into: string[] = []): string[] {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) stringsIn(item, into);
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      into.push(key);
      stringsIn(item, into);
    }
  }
  return into;
}

/** Every `[field name, value]` in a parsed value whose name is an id field's, however deep. */
export function idFieldsIn(value: unknown, into: Array<[string, unknown]> = []): Array<[string, unknown]> {
  if (Array.isArray(value)) for (const item of value) idFieldsIn(item, into);
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (ID_FIELD.test(key)) into.push([key, item]);
      idFieldsIn(item, into);
    }
  }
  return into;
}

/** A path into a request body: field names and array indexes. */
export type BodyPath = ReadonlyArray<string | number>;

interface ZodDef {
  type: string;
  shape?: Record<string, { _zod: { def: ZodDef } }>;
  innerType?: { _zod: { def: ZodDef } };
  element?: { _zod: { def: ZodDef } };
  in?: { _zod: { def: ZodDef } };
  options?: Array<{ _zod: { def: ZodDef } }>;
  entries?: Record<string, string | number>;
  values?: unknown[];
}

const defOf = (schema: z.ZodType): ZodDef => (schema as unknown as { _zod: { def: ZodDef } })._zod.def;

/**
 * Bodies shaped by the schema itself: every field present with a value of its type (ids valid
 * but hostile), so many pass the parser and reach the handler, and its SQL, with ids that name
 * nothing. Optional fields are sometimes left out.
 */
function plausibleBodyOf(schema: z.ZodType): fc.Arbitrary<JsonText> {
  const build = (def: ZodDef, depth: number): fc.Arbitrary<JsonText> => {
    switch (def.type) {
      case 'string':
        return hostileValidId.map((v) => JSON.stringify(v));
      case 'number':
        return fc.integer({ min: 1, max: 500 }).map(String);
      case 'boolean':
        return fc.boolean().map(String);
      case 'enum':
        return fc.constantFrom(...Object.values(def.entries ?? { x: 'x' })).map((v) => JSON.stringify(v));
      case 'literal':
        return fc.constantFrom(...(def.values ?? [null])).map((v) => JSON.stringify(v));
      case 'object': {
        const fields = Object.entries(def.shape ?? {}).map(([key, field]) => {
          const fieldDef = field._zod.def;
          const value = build(fieldDef, depth + 1).map((v) => [key, v] as const);
          return fieldDef.type === 'optional' ? fc.option(value, { nil: undefined }) : value.map((entry): readonly [string, JsonText] | undefined => entry);
        });
        return fc.tuple(...fields).map((entries) => objectText(entries.filter((e): e is readonly [string, JsonText] => e !== undefined)));
      }
      case 'array':
        return depth > 4 || !def.element
          ? fc.constant('[]')
          : fc.array(build(def.element._zod.def, depth + 1), { maxLength: 2 }).map((items) => `[${items.join(',')}]`);
      case 'union':
        return fc.oneof(...(def.options ?? []).map((option) => build(option._zod.def, depth + 1)));
      case 'optional':
      case 'default':
      case 'nullable':
      case 'prefault':
        return def.innerType ? build(def.innerType._zod.def, depth) : hostileJson;
      case 'pipe':
        return def.in ? build(def.in._zod.def, depth) : hostileJson;
      default:
        return hostileJson;
    }
  };
  return build(defOf(schema), 0);
}

/**
 * Every path of `schema` that ends in a string, through objects, arrays (index 0), and optional,
 * default and nullable wrappers: where a caller's text enters the request.
 */
export function stringPathsOf(schema: z.ZodType): BodyPath[] {
  const paths: BodyPath[] = [];
  const walk = (def: ZodDef, path: BodyPath): void => {
    switch (def.type) {
      case 'string':
        paths.push(path);
        return;
      case 'object':
        for (const [key, field] of Object.entries(def.shape ?? {})) walk(field._zod.def, [...path, key]);
        return;
      case 'array':
        if (def.element) walk(def.element._zod.def, [...path, 0]);
        return;
      case 'optional':
      case 'default':
      case 'nullable':
      case 'prefault':
        if (def.innerType) walk(def.innerType._zod.def, path);
        return;
      case 'pipe':
        if (def.in) walk(def.in._zod.def, path);
        return;
    }
  };
  walk(defOf(schema), []);
  return paths;
}

/** The string paths of `schema` that are ids: their field (or, in a list, the list) is named like one. */
export function idPathsOf(schema: z.ZodType): BodyPath[] {
  return stringPathsOf(schema).filter((path) => ID_FIELD.test(String([...path].reverse().find((part) => typeof part === 'string') ?? '')));
}

/** JSON text holding `value` at `path` (`{"answers":[{"question_id": value}]}`). */
export function textAtPath(path: BodyPath, value: JsonText): JsonText {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  return typeof head === 'number' ? `[${textAtPath(rest, value)}]` : objectText([[head!, textAtPath(rest, value)]]);
}

/** How zod's prettified error names a path: `answers[0].question_id`. */
export function pathLabel(path: BodyPath): string {
  return path.map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? part : `.${part}`)).join('');
}
