import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRows } from '../../src/repository/context.js';
import { isTruthyFlag } from '../../src/turns/index.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';

interface Row {
  /** What the document is, for the test name. */
  label: string;
  /** The raw metadata column text; null is SQL NULL. */
  doc: string | null;
  /** dialect.jsonFlag(doc, 'k') */
  flag: boolean;
  /** dialect.jsonString(doc, 'k') */
  string: string | null;
  /** dialect.jsonStringOrAbsent(doc, 'k') */
  stringOrAbsent: string | null;
}

// D12 and the normalisation rules in src/repository/dialect.ts: a flag is JSON true, a number equal
// to 1, "true" or "1"; a string field is read only from a JSON string; a document that is not a
// JSON object (NULL, '', malformed, array, scalar) has no keys.
const TABLE: Row[] = [
  { label: 'JSON true', doc: '{"k":true}', flag: true, string: null, stringOrAbsent: null },
  { label: 'JSON 1', doc: '{"k":1}', flag: true, string: null, stringOrAbsent: null },
  { label: 'JSON 1.0', doc: '{"k":1.0}', flag: true, string: null, stringOrAbsent: null },
  { label: 'JSON 1e0', doc: '{"k":1e0}', flag: true, string: null, stringOrAbsent: null },
  { label: 'JSON "1"', doc: '{"k":"1"}', flag: true, string: '1', stringOrAbsent: '1' },
  { label: 'JSON "true"', doc: '{"k":"true"}', flag: true, string: 'true', stringOrAbsent: 'true' },
  { label: 'JSON false', doc: '{"k":false}', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON 0', doc: '{"k":0}', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON 2', doc: '{"k":2}', flag: false, string: null, stringOrAbsent: null },
  {
    label: 'a number within a double rounding of 1 (compared as a double everywhere)',
    doc: '{"k":1.0000000000000001}',
    flag: true,
    string: null,
    stringOrAbsent: null,
  },
  { label: 'a number beyond double range', doc: '{"k":1e400}', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON "yes"', doc: '{"k":"yes"}', flag: false, string: 'yes', stringOrAbsent: 'yes' },
  { label: 'JSON "TRUE"', doc: '{"k":"TRUE"}', flag: false, string: 'TRUE', stringOrAbsent: 'TRUE' },
  { label: 'JSON "false"', doc: '{"k":"false"}', flag: false, string: 'false', stringOrAbsent: 'false' },
  { label: 'JSON "0"', doc: '{"k":"0"}', flag: false, string: '0', stringOrAbsent: '0' },
  { label: 'JSON ""', doc: '{"k":""}', flag: false, string: '', stringOrAbsent: '' },
  { label: 'JSON "x"', doc: '{"k":"x"}', flag: false, string: 'x', stringOrAbsent: 'x' },
  { label: 'JSON ["1"]', doc: '{"k":["1"]}', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON []', doc: '{"k":[]}', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON {}', doc: '{"k":{}}', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON null', doc: '{"k":null}', flag: false, string: null, stringOrAbsent: '' },
  { label: 'an absent key', doc: '{"other":"1"}', flag: false, string: null, stringOrAbsent: '' },
  { label: "the document '{}'", doc: '{}', flag: false, string: null, stringOrAbsent: '' },
  { label: 'a document padded with whitespace', doc: ' \n{"k":1} ', flag: true, string: null, stringOrAbsent: null },
  { label: 'an escaped string value', doc: '{"k":"\\u0031"}', flag: true, string: '1', stringOrAbsent: '1' },
  { label: "the empty text ''", doc: '', flag: false, string: null, stringOrAbsent: null },
  { label: "the text 'garbage'", doc: 'garbage', flag: false, string: null, stringOrAbsent: null },
  { label: 'truncated JSON', doc: '{"k":true', flag: false, string: null, stringOrAbsent: null },
  { label: 'JSON5 (unquoted key)', doc: '{k:true}', flag: false, string: null, stringOrAbsent: null },
  { label: 'a trailing comma', doc: '{"k":"1",}', flag: false, string: null, stringOrAbsent: null },
  { label: 'SQL NULL', doc: null, flag: false, string: null, stringOrAbsent: null },
  { label: "the array '[1]'", doc: '[1]', flag: false, string: null, stringOrAbsent: null },
  { label: 'an array of objects', doc: '[{"k":"1"}]', flag: false, string: null, stringOrAbsent: null },
  { label: `the JSON string '"x"'`, doc: '"x"', flag: false, string: null, stringOrAbsent: null },
  { label: 'the JSON number 1', doc: '1', flag: false, string: null, stringOrAbsent: null },
  { label: 'the JSON literal null', doc: 'null', flag: false, string: null, stringOrAbsent: null },
];

// jsonString with a nested path: the string at a.k, NULL for anything else.
const NESTED: Array<{ label: string; doc: string | null; value: string | null }> = [
  { label: 'a nested string', doc: '{"a":{"k":"x"}}', value: 'x' },
  { label: 'a nested number', doc: '{"a":{"k":1}}', value: null },
  { label: 'a string where the object should be', doc: '{"a":"x"}', value: null },
  { label: 'an array where the object should be', doc: '{"a":["x"]}', value: null },
  { label: 'a missing parent key', doc: '{"k":"x"}', value: null },
  { label: 'malformed text', doc: 'garbage', value: null },
  { label: 'SQL NULL', doc: null, value: null },
];

/** Parseable documents whose root is an object: where the TypeScript rule reads a key at all. */
function parsedObject(doc: string | null): Record<string, unknown> | undefined {
  if (doc === null) return undefined;
  try {
    const parsed: unknown = JSON.parse(doc);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

describe('the TypeScript marker test', () => {
  it.each(TABLE.filter((row) => parsedObject(row.doc) !== undefined).map((row) => [row.label, row] as const))(
    'agrees with the SQL flag for %s',
    (_label, row) => {
      expect(isTruthyFlag(parsedObject(row.doc)?.k)).toBe(row.flag);
    },
  );
});

describeEachDialect('JSON normalisation on %s (D9, D12)', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  async function evaluate(expression: string, doc: string | null): Promise<unknown> {
    const rows = await rawRows<{ v: unknown }>(t.ctx, `SELECT ${expression} AS v FROM (SELECT CAST(? AS TEXT) AS doc) x`, [doc]);
    expect(rows).toHaveLength(1);
    return rows[0]?.v;
  }

  it.each(TABLE.map((row) => [row.label, row] as const))('reads %s identically on both dialects', async (_label, row) => {
    const flag = await evaluate(t.ctx.dialect.jsonFlag('x.doc', 'k'), row.doc);
    // SQLite answers 1/0, PostgreSQL true/false; never NULL on either.
    expect(flag).not.toBeNull();
    expect(Boolean(flag)).toBe(row.flag);
    expect(await evaluate(t.ctx.dialect.jsonString('x.doc', 'k'), row.doc)).toBe(row.string);
    expect(await evaluate(t.ctx.dialect.jsonStringOrAbsent('x.doc', 'k'), row.doc)).toBe(row.stringOrAbsent);
  });

  it.each(NESTED.map((row) => [row.label, row] as const))('reads a nested path through %s', async (_label, row) => {
    expect(await evaluate(t.ctx.dialect.jsonString('x.doc', 'a', 'k'), row.doc)).toBe(row.value);
  });

  it('evaluates every document of the table in one statement, malformed rows included, without raising', async () => {
    const union = TABLE.map(() => 'SELECT CAST(? AS TEXT) AS doc').join(' UNION ALL ');
    const d = t.ctx.dialect;
    const rows = await rawRows<{ doc: string | null; flag: unknown; s: string | null; sa: string | null }>(
      t.ctx,
      `SELECT x.doc, ${d.jsonFlag('x.doc', 'k')} AS flag, ${d.jsonString('x.doc', 'k')} AS s, ${d.jsonStringOrAbsent('x.doc', 'k')} AS sa FROM (${union}) x`,
      TABLE.map((row) => row.doc),
    );
    expect(rows.map((r) => ({ doc: r.doc, flag: Boolean(r.flag), string: r.s, stringOrAbsent: r.sa })).sort(byDoc)).toEqual(
      TABLE.map((row) => ({ doc: row.doc, flag: row.flag, string: row.string, stringOrAbsent: row.stringOrAbsent })).sort(byDoc),
    );
  });

  it('filters by the flag in WHERE, and by its negation, without raising on malformed rows', async () => {
    const union = TABLE.map(() => 'SELECT CAST(? AS TEXT) AS doc').join(' UNION ALL ');
    const flag = t.ctx.dialect.jsonFlag('x.doc', 'k');
    const bindings = TABLE.map((row) => row.doc);
    const truthy = await rawRows<{ doc: string | null }>(t.ctx, `SELECT x.doc FROM (${union}) x WHERE ${flag}`, bindings);
    const falsy = await rawRows<{ doc: string | null }>(t.ctx, `SELECT x.doc FROM (${union}) x WHERE NOT ${flag}`, bindings);
    expect(truthy.map((r) => r.doc).sort()).toEqual(
      TABLE.filter((row) => row.flag)
        .map((row) => row.doc)
        .sort(),
    );
    expect(falsy).toHaveLength(TABLE.filter((row) => !row.flag).length);
  });

  it('refuses a JSON key that is not identifier-shaped, since keys are spliced into SQL text', () => {
    expect(() => t.ctx.dialect.jsonFlag('x.doc', "k') OR 1=1 --")).toThrow(/unsupported JSON key/);
    expect(() => t.ctx.dialect.jsonString('x.doc', 'a', 'K')).toThrow(/unsupported JSON key/);
  });
});

// Open D9 defects found while writing this suite. They are pinned, not endorsed: each test asserts
// today's divergent answers so that a fix (in migrations/0001 or src/repository/dialect.ts) makes it
// fail and is then moved into TABLE with one expected answer for both dialects and TypeScript.
const KNOWN_DIVERGENCES: Array<{
  label: string;
  doc: string;
  expression: 'flag' | 'string';
  sqlite: unknown;
  postgres: unknown;
  typescript: unknown;
}> = [
  {
    label: 'a duplicated flag key: SQLite reads the first value, PostgreSQL (jsonb) and TypeScript (JSON.parse) the last',
    doc: '{"k":true,"k":false}',
    expression: 'flag',
    sqlite: true,
    postgres: false,
    typescript: false,
  },
  {
    label: 'a duplicated string key: SQLite reads the first value, PostgreSQL and TypeScript the last',
    doc: '{"k":"a","k":"b"}',
    expression: 'string',
    sqlite: 'a',
    postgres: 'b',
    typescript: 'b',
  },
  {
    label: 'a \\u0000 escape anywhere in the document: PostgreSQL jsonb rejects the whole document, SQLite and TypeScript read it',
    doc: '{"k":"1","other":"\\u0000"}',
    expression: 'flag',
    sqlite: true,
    postgres: false,
    typescript: true,
  },
  {
    label: 'a \\u0000 escape anywhere in the document hides a string key on PostgreSQL only',
    doc: '{"k":"1","other":"\\u0000"}',
    expression: 'string',
    sqlite: '1',
    postgres: null,
    typescript: '1',
  },
];

describeEachDialect('known JSON normalisation divergences on %s (open D9 defects, pinned so a fix is noticed)', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  it.each(KNOWN_DIVERGENCES.map((row) => [row.label, row] as const))('still diverges on %s', async (_label, row) => {
    const d = t.ctx.dialect;
    const expression = row.expression === 'flag' ? d.jsonFlag('x.doc', 'k') : d.jsonString('x.doc', 'k');
    const rows = await rawRows<{ v: unknown }>(t.ctx, `SELECT ${expression} AS v FROM (SELECT CAST(? AS TEXT) AS doc) x`, [row.doc]);
    const value = rows[0]?.v;
    expect(row.expression === 'flag' ? Boolean(value) : value).toBe(row[dialect]);
    const parsedK = (JSON.parse(row.doc) as Record<string, unknown>).k;
    expect(row.expression === 'flag' ? isTruthyFlag(parsedK) : parsedK).toBe(row.typescript);
  });
});

function byDoc(a: { doc: string | null }, b: { doc: string | null }): number {
  const ka = a.doc ?? '\u0000null';
  const kb = b.doc ?? '\u0000null';
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
