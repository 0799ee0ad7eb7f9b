import type { Knex } from 'knex';
import type { DialectName } from '../../src/repository/dialect.js';

/** One row as the seeders plan it: column name to value, in the schema's snake_case. */
export type Row = Record<string, string | number | null>;

// SQLite's SQLITE_MAX_VARIABLE_NUMBER is 32766; PostgreSQL's wire protocol caps a statement at 65535.
const MAX_BINDINGS: Record<DialectName, number> = { sqlite: 32_000, postgres: 65_000 };

/**
 * Multi-row `INSERT ... VALUES (...), (...)` under the dialect's binding limit (Knex would compile a
 * multi-row SQLite insert as a UNION ALL of SELECTs, capped at 500 terms). Every row has the columns
 * of the first.
 */
export async function insertRows(trx: Knex | Knex.Transaction, dialect: DialectName, table: string, rows: readonly Row[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const head = `INSERT INTO ${table} (${columns.join(', ')}) VALUES `;
  const perStatement = Math.max(1, Math.floor(MAX_BINDINGS[dialect] / columns.length));
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = rows.slice(i, i + perStatement);
    await trx.raw(
      head + chunk.map(() => tuple).join(', '),
      chunk.flatMap((row) => columns.map((c) => row[c] ?? null)),
    );
  }
}
