import { afterAll, beforeAll, expect, it } from 'vitest';
import { idProblem, MAX_ID_LENGTH, unstorableTextProblem } from '../../src/storableText.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';

/** What the database hands back for a bound string: itself, another string, or an error code. */
async function roundTrip(t: TestDatabase, value: string, as: 'text' | 'json'): Promise<string> {
  const sql = {
    text: { sqlite: 'SELECT ? AS v', postgres: 'SELECT ?::text AS v' },
    json: { sqlite: `SELECT json_extract(json(?), '$.v') AS v`, postgres: `SELECT (?::jsonb) ->> 'v' AS v` },
  }[as][t.name];
  const binding = as === 'text' ? value : JSON.stringify({ v: value });
  try {
    const result = await t.ctx.knex.raw(sql, [binding]);
    const row = (t.name === 'postgres' ? result.rows[0] : result[0]) as { v: string };
    return row.v === value ? 'same' : 'changed';
  } catch (err) {
    return `error ${(err as { code?: string }).code}`;
  }
}

const NUL = 'task\u0000';
const LONE_SURROGATE = 'task\ud800';

// Why the rule in src/storableText.ts exists, pinned per dialect: each refused character is one that
// some dialect fails on (every retry alike) or stores as another string.
const expected = {
  sqlite: { text: { nul: 'same', lone: 'changed' }, json: { nul: 'same', lone: 'changed' } },
  postgres: { text: { nul: 'error 22021', lone: 'changed' }, json: { nul: 'error 22P05', lone: 'error 22P02' } },
} as const;

describeEachDialect('strings bound into SQL on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each(['text', 'json'] as const)('as %s, fail or change for exactly the characters the rule refuses', async (as) => {
    expect(unstorableTextProblem(NUL)).toMatch(/NUL/);
    expect(unstorableTextProblem(LONE_SURROGATE)).toMatch(/surrogate/);
    expect({ nul: await roundTrip(t, NUL, as), lone: await roundTrip(t, LONE_SURROGATE, as) }).toEqual(expected[dialect][as]);
  });

  it.each(['text', 'json'] as const)('as %s, come back unchanged for every id and text the rule accepts', async (as) => {
    for (const value of [
      'x'.repeat(MAX_ID_LENGTH),
      '6f0c7a52-9d1e-4f0b-8c1a-2b3c4d5e6f70',
      'tâche-😀-\u{10ffff}',
      'quote \' and "double"',
      'tab\tnewline\n\u0001',
    ]) {
      expect(idProblem(value)).toBeUndefined();
      expect(await roundTrip(t, value, as)).toBe('same');
    }
  });
});
