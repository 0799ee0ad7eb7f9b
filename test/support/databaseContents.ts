import { rawRows } from '../../src/repository/context.js';
import { catalogSnapshot } from './catalog.js';
import type { TestDatabase } from './databases.js';

/**
 * The structure (catalogSnapshot) and every row of every table of `t`, to show that something only
 * read it: two results are equal exactly when nothing was created, altered, dropped or written.
 */
export async function databaseContents(t: TestDatabase): Promise<{ catalog: Record<string, string>; rows: Record<string, unknown[]> }> {
  const catalog = Object.fromEntries(await catalogSnapshot(t));
  const tables =
    t.name === 'sqlite'
      ? await rawRows<{ name: string }>(t.ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      : await rawRows<{ name: string }>(t.ctx, 'SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename');
  const rows: Record<string, unknown[]> = {};
  for (const { name } of tables) rows[name] = await rawRows(t.ctx, `SELECT * FROM "${name}" ORDER BY 1`);
  return { catalog, rows };
}

/**
 * PostgreSQL: which of `schemas` exist, and every table, index and function in them, named. What a
 * command could create outside the test's own schema (in `public`, or a schema a URL names).
 */
export async function postgresObjects(t: TestDatabase, schemas: readonly string[]): Promise<Record<string, string[]>> {
  const names = <R extends { name: string }>(rows: R[]) => rows.map((row) => row.name);
  return {
    schemas: names(await rawRows<{ name: string }>(t.ctx, 'SELECT nspname AS name FROM pg_namespace WHERE nspname = ANY(?::text[]) ORDER BY 1', [schemas])),
    tables: names(
      await rawRows<{ name: string }>(t.ctx, "SELECT schemaname || '.' || tablename AS name FROM pg_tables WHERE schemaname = ANY(?::text[]) ORDER BY 1", [
        schemas,
      ]),
    ),
    indexes: names(
      await rawRows<{ name: string }>(t.ctx, "SELECT schemaname || '.' || indexname AS name FROM pg_indexes WHERE schemaname = ANY(?::text[]) ORDER BY 1", [
        schemas,
      ]),
    ),
    functions: names(
      await rawRows<{ name: string }>(
        t.ctx,
        "SELECT n.nspname || '.' || p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ANY(?::text[]) ORDER BY 1",
        [schemas],
      ),
    ),
  };
}
