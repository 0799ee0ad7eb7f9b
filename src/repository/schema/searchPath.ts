import { DatabaseUrlError } from '../databaseUrlError.js';
import { catalogRows, type SchemaTarget } from './catalog.js';

/**
 * PostgreSQL resolves every unqualified name through the session's `search_path`. When none of its
 * schemas exists (`?options=-c search_path=nosuch`), `current_schema()` is NULL: every table reads
 * as missing, so the database looks empty, and the first CREATE fails with 3F000 ("no schema has
 * been selected to create in"). This names that case before anything is decided or migrated.
 */
export interface MissingSearchPathSchema {
  /** The setting as the server reports it, e.g. `nosuch` or `"$user", public`. */
  readonly searchPath: string;
  /** The statement that creates its first schema (`"$user"` skipped), or null when it names none. */
  readonly createSchema: string | null;
}

/** The schema names of a search_path value, unquoted, without `$user`. */
function schemaNames(searchPath: string): string[] {
  return searchPath
    .split(',')
    .map((part) => part.trim())
    .map((part) => (part.startsWith('"') && part.endsWith('"') && part.length >= 2 ? part.slice(1, -1).replaceAll('""', '"') : part))
    .filter((name) => name !== '' && name !== '$user');
}

function quoteIdentifier(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`;
}

/** Undefined when the search path selects a schema (always on SQLite, which has none). */
export async function missingSearchPathSchema(target: SchemaTarget): Promise<MissingSearchPathSchema | undefined> {
  if (target.dialect.name !== 'postgres') return undefined;
  const [row] = await catalogRows<{ current: string | null; search_path: string }>(
    target,
    "SELECT current_schema() AS current, current_setting('search_path') AS search_path",
  );
  if (!row || row.current !== null) return undefined;
  const first = schemaNames(row.search_path)[0];
  return { searchPath: row.search_path, createSchema: first === undefined ? null : `CREATE SCHEMA ${quoteIdentifier(first)}` };
}

/** For a person: what is wrong and the two ways out. */
export function describeMissingSearchPathSchema(missing: MissingSearchPathSchema): string {
  const create = missing.createSchema ? `create it (${missing.createSchema};)` : 'name an existing schema';
  return `the search_path of DATABASE_URL (${missing.searchPath}) names no schema that exists in this database, so there is nowhere to read or create the service's tables: ${create}, or change search_path in the URL's options`;
}

/** A DATABASE_URL whose search_path selects no existing schema: a configuration error (exit 2). */
export class SearchPathSchemaMissingError extends DatabaseUrlError {
  override name = 'SearchPathSchemaMissingError';
  constructor(readonly missing: MissingSearchPathSchema) {
    super(describeMissingSearchPathSchema(missing));
  }
}
