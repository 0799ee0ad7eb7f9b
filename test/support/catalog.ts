import { createHash } from 'node:crypto';
import { rawRows } from '../../src/repository/context.js';
import type { TestDatabase } from './databases.js';

/**
 * Everything the catalog says about a database's structure, one entry per object, keyed
 * `kind:name`, valued by its full definition. Two snapshots equal on a key mean the object is
 * byte-identical in structure. SQLite: every sqlite_master row (its stored statement holds the
 * columns, types, defaults and constraints). PostgreSQL: information_schema.columns, pg_indexes,
 * pg_constraint and the schema's functions (bodies as digests).
 */
export async function catalogSnapshot(t: TestDatabase): Promise<Map<string, string>> {
  const entries: Array<[string, unknown]> = [];
  if (t.name === 'sqlite') {
    for (const row of await rawRows<{ type: string; name: string; tbl_name: string; sql: string | null }>(
      t.ctx,
      'SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name',
    )) {
      entries.push([`${row.type}:${row.name}`, { table: row.tbl_name, sql: row.sql }]);
    }
    return new Map(entries.map(([key, value]) => [key, JSON.stringify(value)]));
  }
  for (const row of await rawRows<Record<string, unknown>>(
    t.ctx,
    `SELECT table_name, column_name, ordinal_position, data_type, udt_name, character_maximum_length, numeric_precision,
            datetime_precision, is_nullable, column_default, collation_name
       FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
  )) {
    entries.push([`column:${String(row.table_name)}.${String(row.column_name)}`, row]);
  }
  for (const row of await rawRows<{ indexname: string; tablename: string; indexdef: string }>(
    t.ctx,
    'SELECT indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname',
  )) {
    entries.push([`index:${row.indexname}`, row]);
  }
  for (const row of await rawRows<{ table_name: string; conname: string; contype: string; definition: string }>(
    t.ctx,
    `SELECT c.conrelid::regclass::text AS table_name, c.conname, c.contype, pg_get_constraintdef(c.oid) AS definition
       FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE n.nspname = current_schema() ORDER BY c.conname`,
  )) {
    entries.push([`constraint:${row.table_name}.${row.conname}`, row]);
  }
  for (const row of await rawRows<{ name: string; args: string; result: string; volatility: string; body: string }>(
    t.ctx,
    `SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result,
            p.provolatile AS volatility, p.prosrc AS body
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = current_schema() ORDER BY p.proname`,
  )) {
    entries.push([`function:${row.name}(${row.args})`, { ...row, body: createHash('md5').update(row.body).digest('hex') }]);
  }
  return new Map(entries.map(([key, value]) => [key, JSON.stringify(value)]));
}

/** The entries of `after` that `before` lacks or holds differently. */
export function catalogChanges(
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): { added: string[]; changed: string[]; removed: string[] } {
  return {
    added: [...after.keys()].filter((key) => !before.has(key)).sort(),
    changed: [...before.keys()].filter((key) => after.has(key) && after.get(key) !== before.get(key)).sort(),
    removed: [...before.keys()].filter((key) => !after.has(key)).sort(),
  };
}
