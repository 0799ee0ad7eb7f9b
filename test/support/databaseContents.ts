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
      : await rawRows<{ name: string }>(t.ctx, "SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename");
  const rows: Record<string, unknown[]> = {};
  for (const { name } of tables) rows[name] = await rawRows(t.ctx, `SELECT * FROM "${name}" ORDER BY 1`);
  return { catalog, rows };
}
