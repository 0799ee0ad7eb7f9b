import type { Knex } from 'knex';
import type { DialectName, SqlDialect } from '../dialect.js';

/**
 * Reads of the database's catalog, as the service's unqualified queries resolve names: SQLite's
 * `sqlite_master` and `pragma_table_info`; PostgreSQL's `pg_catalog` through `to_regclass`, so a
 * table is the one the search path finds, whichever schema holds it.
 */

/** What the schema functions run against: a Database, a RepositoryContext or a transaction. */
export interface SchemaTarget {
  readonly knex: Knex | Knex.Transaction;
  readonly dialect: SqlDialect;
}

export async function catalogRows<T>(target: SchemaTarget, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  return target.dialect.rawResultRows<T>(await target.knex.raw(sql, bindings as Knex.RawBinding[]));
}

export interface CatalogColumn {
  readonly name: string;
  /** As the catalog spells it: SQLite's declared type (`TEXT`, `TIMESTAMP`), PostgreSQL's format_type (`timestamp without time zone`). */
  readonly type: string;
}

/** The columns of each of `tables` that exists; a table absent from the map does not exist. */
export function tableColumns(target: SchemaTarget, tables: readonly string[]): Promise<Map<string, CatalogColumn[]>> {
  return CATALOGS[target.dialect.name].tableColumns(target, tables);
}

async function sqliteTableColumns(target: SchemaTarget, tables: readonly string[]): Promise<Map<string, CatalogColumn[]>> {
  const found = new Map<string, CatalogColumn[]>();
  for (const table of tables) {
    const exists = await catalogRows(target, `SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE`, [table]);
    if (exists.length === 0) continue;
    const columns = await catalogRows<{ name: string; type: string }>(target, 'SELECT name, type FROM pragma_table_info(?) ORDER BY cid', [table]);
    found.set(
      table,
      columns.map((c) => ({ name: c.name, type: c.type })),
    );
  }
  return found;
}

async function postgresTableColumns(target: SchemaTarget, tables: readonly string[]): Promise<Map<string, CatalogColumn[]>> {
  const found = new Map<string, CatalogColumn[]>();
  const rows = await catalogRows<{ table_name: string; name: string | null; type: string | null }>(
    target,
    `SELECT wanted.name AS table_name, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
       FROM unnest(?::text[]) WITH ORDINALITY AS wanted(name, position)
       JOIN pg_class c ON c.oid = to_regclass(wanted.name)
       LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY wanted.position, a.attnum`,
    [tables],
  );
  for (const row of rows) {
    const columns = found.get(row.table_name) ?? [];
    if (row.name !== null && row.type !== null) columns.push({ name: row.name, type: row.type });
    found.set(row.table_name, columns);
  }
  return found;
}

/** A relation found under an index's name, in the schema where the index would be created. */
export interface NamedRelation {
  /** `index`, or what else holds the name (`table`, `view`, ...). */
  readonly kind: string;
  /** The indexed table, for an index. */
  readonly table: string | null;
  /** The index's definition as the catalog reports it (sqlite_master.sql; pg_get_indexdef), null for other kinds. */
  readonly definition: string | null;
  /** PostgreSQL: false for an index a failed CREATE INDEX CONCURRENTLY left behind. SQLite: always true. */
  readonly valid: boolean;
  /** PostgreSQL: the schema holding it, to drop exactly that one. */
  readonly schema: string | null;
}

/**
 * What holds the name `name` where an index on `table` would be created (SQLite: the database;
 * PostgreSQL: the schema of the table the search path finds). Undefined when nothing does.
 */
export function relationNamed(target: SchemaTarget, name: string, table: string): Promise<NamedRelation | undefined> {
  return CATALOGS[target.dialect.name].relationNamed(target, name, table);
}

async function sqliteRelationNamed(target: SchemaTarget, name: string): Promise<NamedRelation | undefined> {
  const rows = await catalogRows<{ type: string; tbl_name: string; sql: string | null }>(
    target,
    'SELECT type, tbl_name, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE',
    [name],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { kind: row.type, table: row.type === 'index' ? row.tbl_name : null, definition: row.type === 'index' ? row.sql : null, valid: true, schema: null };
}

async function postgresRelationNamed(target: SchemaTarget, name: string, table: string): Promise<NamedRelation | undefined> {
  const rows = await catalogRows<{ kind: string; table_name: string | null; definition: string | null; valid: boolean | null; schema: string }>(
    target,
    `SELECT CASE c.relkind WHEN 'i' THEN 'index' WHEN 'I' THEN 'index' WHEN 'r' THEN 'table' WHEN 'p' THEN 'table'
                WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' ELSE 'relation' END AS kind,
            t.relname AS table_name,
            CASE WHEN i.indexrelid IS NOT NULL THEN pg_get_indexdef(c.oid) END AS definition,
            i.indisvalid AS valid, n.nspname AS schema
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_index i ON i.indexrelid = c.oid
       LEFT JOIN pg_class t ON t.oid = i.indrelid
      WHERE c.relname = ? AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass(?))`,
    [name, table],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { kind: row.kind, table: row.table_name, definition: row.definition, valid: row.valid !== false, schema: row.schema };
}

/** Each dialect's catalog reads, side by side: SQLite's sqlite_master and pragmas, PostgreSQL's pg_catalog. */
const CATALOGS: Record<DialectName, { tableColumns: typeof sqliteTableColumns; relationNamed: typeof postgresRelationNamed }> = {
  sqlite: { tableColumns: sqliteTableColumns, relationNamed: (target, name) => sqliteRelationNamed(target, name) },
  postgres: { tableColumns: postgresTableColumns, relationNamed: postgresRelationNamed },
};
