/**
 * Everything that differs between SQLite and PostgreSQL, declared once and side by side.
 *
 * Both dialects store JSON as TEXT (Kandev's schema). Rows written by other producers may hold
 * NULL, '' or malformed JSON; Kandev's own queries raise an SQL error there. Every fragment below
 * reads such a document as "no keys", so a malformed row can never fail a query that other rows
 * depend on, and never counts as a flag, a status or a bundle id.
 *
 * Normalisation rules (identical on both dialects and in `src/turns/lifecycleTurn.ts`):
 * - a flag is true for JSON `true`, a JSON number equal to 1, or the strings "true" / "1";
 * - a string field is read only when its JSON value is a string;
 * - a document whose root is not an object has no keys.
 */

import { toKandevTimestamp, type CanonicalTimestamp, type TimestampForm } from '../timestamps.js';

export type DialectName = 'sqlite' | 'postgres';

/**
 * The timestamp texts a database's Kandev-owned tables hold, detected once when it is opened
 * (`detectTimestampForms`) and fixed for the life of a repository context.
 */
export interface TimestampForms {
  /**
   * A timestamp column may hold text of more than one form (SQLite with Kandev's rows), so its text
   * order is not time order and every ordering goes through the normalised key. False on
   * PostgreSQL, whose columns hold instants, and on a SQLite database holding only canonical text.
   */
  readonly mixed: boolean;
  /** The form this service writes into Kandev-owned tables: the one the database already uses. */
  readonly writes: TimestampForm;
}

/** A SQL fragment plus the bindings its `?` placeholders need, in order. */
export interface SqlFragment {
  sql: string;
  bindings: unknown[];
}

export interface SqlDialect {
  readonly name: DialectName;
  /**
   * The statement that opens a transaction. SQLite's is IMMEDIATE: it takes the write lock at BEGIN,
   * because a deferred transaction that reads first and writes later cannot wait for another
   * process's writer (SQLite fails the upgrade at once with "database is locked"; busy_timeout does
   * not apply, to avoid deadlock). Every transaction of this service may write.
   */
  readonly beginTransaction: string;
  /** The rows of a `knex.raw` result: pg wraps them in a result object, better-sqlite3 returns them as they are. */
  rawResultRows<T>(result: unknown): T[];
  /** Boolean expression: the JSON value at `key` is one of the four truthy encodings. Never NULL. */
  jsonFlag(column: string, key: string): string;
  /** Boolean expression: the JSON value at `key` is exactly JSON `true` (Kandev's reading of its own flags). Never NULL. */
  jsonTrue(column: string, key: string): string;
  /** Text expression: the JSON string at `path` (nested keys), NULL for any other type or document. */
  jsonString(column: string, ...path: string[]): string;
  /**
   * Text expression for status-like keys: the string value, '' when the key is absent or JSON null,
   * NULL when the value is not a string or the document is not a JSON object.
   */
  jsonStringOrAbsent(column: string, key: string): string;
  /**
   * Text expression: `column` with top-level keys set (shallow replace) and others removed. A NULL,
   * malformed or non-object document is patched as `{}`.
   */
  jsonPatch(column: string, set: Record<string, unknown>, remove?: readonly string[]): SqlFragment;
  /** `IN (...)` membership against one bound list, so a batch of any size is one statement. */
  inList(operand: string, values: readonly string[]): SqlFragment;
  /** Boolean: a TEXT column holds a canonical positive integer ("1".."999999999999999999"). */
  isCanonicalPositiveInteger(column: string): string;
  /** Text expression: the canonical integer text in `column` plus one, as canonical integer text. */
  incrementIntegerText(column: string): string;
  /**
   * A text expression compared by code units, as SQLite's BINARY and JavaScript do. PostgreSQL
   * would otherwise compare ids by the database's collation, where "TURN-x" and "turn-x" can sort
   * the other way round and a tie on every other key would resolve differently.
   */
  binaryText(expression: string): string;
  /** The UTF-8 bytes of a text expression, 0 for NULL: the unit of Kandev's size limits (SQLite's length() counts characters). */
  utf8Bytes(expression: string): string;
  /**
   * A text expression that orders and compares as the instant in timestamp column `column` of a
   * Kandev-owned table, in the canonical form truncated to microseconds, so it also compares with a
   * bound canonical instant and equals what `readStoredTimestamp` gives JavaScript for the row. Every
   * ORDER BY, MIN/MAX and comparison on such a column goes through it, so both dialects resolve the same current turn. It is the column
   * itself wherever text order already is time order (PostgreSQL, canonical-only SQLite), so those
   * statements, and the indexes that serve them, stay as they are.
   */
  timestampKey(column: string): string;
  /**
   * The text written for the canonical instant `value` into a timestamp column of a Kandev-owned
   * table: the form the database already holds (`timestampForms.writes`), so Kandev's own plain-text
   * `ORDER BY started_at` stays time order. This service's own tables always hold canonical text.
   */
  storedTimestamp(value: CanonicalTimestamp): string;
  readonly timestampForms: TimestampForms;
  /**
   * One writer at a time, whatever the pool or the process: every write transaction holds the
   * database's one write lock from its BEGIN (SQLite's IMMEDIATE). So a second projection transaction
   * would only queue behind the first, and row locks (`FOR UPDATE`) and advisory locks would
   * serialise nothing more: the code that takes them on PostgreSQL skips them here.
   */
  readonly singleWriter: boolean;
  /**
   * The row-lock clause a `SELECT` of rows about to be changed ends with: ` FOR UPDATE` where row
   * locks serialise writers (PostgreSQL), nothing where the one writer already does (SQLite).
   */
  readonly forUpdate: string;
  /**
   * Timestamp columns hold instants (PostgreSQL's `timestamp`), so nothing about their text form
   * needs detecting; SQLite's hold text, in whatever form the writer chose.
   */
  readonly timestampsAreInstants: boolean;
  /**
   * Parsing metadata refuses `\u0000` escapes and lone surrogates that JavaScript's JSON.parse
   * accepts (PostgreSQL's jsonb); SQLite's JSON functions take them.
   */
  readonly jsonRefusesNulEscapes: boolean;
  /**
   * Session-level advisory locks that hold across processes (PostgreSQL's pg_advisory_lock). Where
   * there are none (SQLite), the admission lease serializes inside the process only, as Kandev's
   * SQLite backend does.
   */
  readonly advisoryLocks: boolean;
  /**
   * The prefix of a statement that builds an index without blocking the table's writers meanwhile
   * (PostgreSQL's CONCURRENTLY, which must run outside a transaction); SQLite has no such option.
   */
  readonly createIndexOnline: string;
  /**
   * A projection may give up its transaction slot once only COMMIT is left: the next batch's
   * transaction runs on another pooled connection beside a COMMIT waiting for its WAL flush.
   * PostgreSQL only: SQLite's one connection stays with the committing transaction, so the next
   * batch could not start before the COMMIT is done anyway.
   */
  readonly releasesSlotBeforeCommit: boolean;
}

const KEY = /^[a-z_][a-z0-9_]*$/;

function checkKey(key: string): string {
  // Keys are spliced into SQL text (JSON paths cannot be bound in SQLite), so only our own
  // identifier-shaped constants are accepted.
  if (!KEY.test(key)) throw new Error(`unsupported JSON key ${JSON.stringify(key)}`);
  return key;
}

function sqliteDoc(column: string): string {
  // CASE is the only construct SQLite guarantees to evaluate lazily; an AND may be reordered and
  // run json_type() on malformed text, which raises.
  return `(CASE WHEN json_valid(${column}) THEN ${column} END)`;
}

export const sqliteDialect: SqlDialect = {
  name: 'sqlite',
  beginTransaction: 'BEGIN IMMEDIATE',
  rawResultRows<T>(result: unknown) {
    return result as T[];
  },
  jsonFlag(column, key) {
    const doc = sqliteDoc(column);
    const path = `'$.${checkKey(key)}'`;
    return (
      `(CASE json_type(${doc}, ${path}) WHEN 'true' THEN 1 ` +
      `WHEN 'integer' THEN json_extract(${doc}, ${path}) = 1 ` +
      `WHEN 'real' THEN json_extract(${doc}, ${path}) = 1 ` +
      `WHEN 'text' THEN json_extract(${doc}, ${path}) IN ('true', '1') ELSE 0 END)`
    );
  },
  jsonTrue(column, key) {
    return `(COALESCE(json_type(${sqliteDoc(column)}, '$.${checkKey(key)}'), '') = 'true')`;
  },
  jsonString(column, ...path) {
    const doc = sqliteDoc(column);
    const jsonPath = `'$.${path.map(checkKey).join('.')}'`;
    return `(CASE WHEN json_type(${doc}, ${jsonPath}) = 'text' THEN json_extract(${doc}, ${jsonPath}) END)`;
  },
  jsonStringOrAbsent(column, key) {
    const doc = sqliteDoc(column);
    const path = `'$.${checkKey(key)}'`;
    return (
      `(CASE WHEN COALESCE(json_type(${doc}), '') <> 'object' THEN NULL ` +
      `WHEN COALESCE(json_type(${doc}, ${path}), 'null') = 'null' THEN '' ` +
      `WHEN json_type(${doc}, ${path}) = 'text' THEN json_extract(${doc}, ${path}) END)`
    );
  },
  jsonPatch(column, set, remove = []) {
    // A document that is not a JSON object reads as "no keys", so the patch starts from '{}'.
    let sql = `COALESCE(CASE WHEN json_valid(${column}) THEN CASE WHEN json_type(${column}) = 'object' THEN ${column} END END, '{}')`;
    if (remove.length > 0) sql = `json_remove(${sql}, ${remove.map((k) => `'$.${checkKey(k)}'`).join(', ')})`;
    const keys = Object.keys(set);
    if (keys.length > 0) sql = `json_set(${sql}, ${keys.map((k) => `'$.${checkKey(k)}', json(?)`).join(', ')})`;
    return { sql, bindings: keys.map((k) => JSON.stringify(set[k])) };
  },
  inList(operand, values) {
    return { sql: `${operand} IN (SELECT value FROM json_each(?))`, bindings: [JSON.stringify(values)] };
  },
  isCanonicalPositiveInteger(column) {
    return `(length(${column}) BETWEEN 1 AND 18 AND ${column} NOT GLOB '*[^0-9]*' AND ${column} NOT GLOB '0*')`;
  },
  incrementIntegerText(column) {
    return `CAST(CAST(${column} AS INTEGER) + 1 AS TEXT)`;
  },
  binaryText(expression) {
    return expression;
  },
  utf8Bytes(expression) {
    return `COALESCE(length(CAST(${expression} AS BLOB)), 0)`;
  },
  timestampKey: (column) => column,
  storedTimestamp: (value) => value,
  timestampForms: { mixed: false, writes: 'canonical' },
  singleWriter: true,
  forUpdate: '',
  timestampsAreInstants: false,
  jsonRefusesNulEscapes: false,
  advisoryLocks: false,
  createIndexOnline: 'CREATE INDEX',
  releasesSlotBeforeCommit: false,
};

export const postgresDialect: SqlDialect = {
  name: 'postgres',
  beginTransaction: 'BEGIN',
  rawResultRows<T>(result: unknown) {
    return (result as { rows: T[] }).rows;
  },
  // The pp_json_* functions are created by the first migration; each parses the document once and
  // turns a cast failure into "no keys" (PostgreSQL 15 has no pg_input_is_valid).
  jsonFlag(column, key) {
    return `pp_json_flag(${column}, '${checkKey(key)}')`;
  },
  jsonTrue(column, key) {
    return `COALESCE(pp_safe_jsonb(${column}) -> '${checkKey(key)}' = 'true'::jsonb, false)`;
  },
  jsonString(column, ...path) {
    return `pp_json_string(${column}, '{${path.map(checkKey).join(',')}}')`;
  },
  jsonStringOrAbsent(column, key) {
    return `pp_json_string_or_absent(${column}, '${checkKey(key)}')`;
  },
  jsonPatch(column, set, remove = []) {
    let sql = `(CASE WHEN jsonb_typeof(pp_safe_jsonb(${column})) = 'object' THEN pp_safe_jsonb(${column}) ELSE '{}'::jsonb END)`;
    if (remove.length > 0) sql = `(${sql} - '{${remove.map(checkKey).join(',')}}'::text[])`;
    const keys = Object.keys(set);
    keys.forEach(checkKey);
    if (keys.length === 0) return { sql: `${sql}::text`, bindings: [] };
    return { sql: `(${sql} || ?::jsonb)::text`, bindings: [JSON.stringify(set)] };
  },
  inList(operand, values) {
    return { sql: `${operand} = ANY(?::text[])`, bindings: [values] };
  },
  isCanonicalPositiveInteger(column) {
    return `(${column} ~ '^[1-9][0-9]{0,17}$')`;
  },
  incrementIntegerText(column) {
    return `(${column}::bigint + 1)::text`;
  },
  binaryText(expression) {
    return `${expression} COLLATE "C"`;
  },
  utf8Bytes(expression) {
    return `COALESCE(octet_length(${expression}), 0)`;
  },
  // `timestamp(6)` columns hold instants: they order natively, and parse either text on input (a
  // zone in the text is ignored, and both forms are UTC).
  timestampKey: (column) => column,
  storedTimestamp: (value) => value,
  timestampForms: { mixed: false, writes: 'canonical' },
  singleWriter: false,
  forUpdate: ' FOR UPDATE',
  timestampsAreInstants: true,
  jsonRefusesNulEscapes: true,
  advisoryLocks: true,
  createIndexOnline: 'CREATE INDEX CONCURRENTLY',
  releasesSlotBeforeCommit: true,
};

export function dialectFor(name: DialectName): SqlDialect {
  return name === 'sqlite' ? sqliteDialect : postgresDialect;
}

/**
 * SQLite's key for a column holding either form: date, 'T', time, the fraction right-padded and cut
 * to six digits, '000Z'. Both forms put the date at 1-10 and the time at 12-19; whatever follows
 * position 20 ('.', '+' or 'Z') is the fraction plus the zone, and trimming the zone's characters
 * and trailing zeros off the right leaves the fraction's significant digits, which padding restores:
 * `…:00.5+00:00` → `….500000000Z`, `…:00+00:00` → `….000000000Z`, `…:00.123456000Z` unchanged.
 * Microseconds, not nanoseconds: PostgreSQL holds microseconds (D9), and a cursor or a turn history
 * read back into JavaScript carries the truncated instant, which must compare equal to its key.
 * Deterministic built-ins only, so an expression index can hold it.
 */
function sqliteTimestampKey(column: string): string {
  return (
    `(substr(${column}, 1, 10) || 'T' || substr(${column}, 12, 8) || '.' || ` + `substr(rtrim(substr(${column}, 21), 'Z+-:0') || '000000', 1, 6) || '000Z')`
  );
}

function kandevTimestamp(value: CanonicalTimestamp): string {
  try {
    return toKandevTimestamp(value);
  } catch {
    // Text that is no instant, read back as stored from another producer (a summary row being
    // restored as it was read), is written back as it was.
    return value;
  }
}

/**
 * `dialect` for a database whose Kandev-owned tables hold `forms`. PostgreSQL is unaffected. On
 * SQLite, canonical-only text keeps the base dialect, statement for statement; anything else
 * orders through the normalised key. Writing Kandev's form implies reading mixed forms.
 */
export function withTimestampForms(dialect: SqlDialect, forms: TimestampForms): SqlDialect {
  if (dialect.name === 'postgres') return dialect;
  if (!forms.mixed && forms.writes === 'canonical')
    return { ...dialect, timestampKey: (column) => column, storedTimestamp: (value) => value, timestampForms: forms };
  return {
    ...dialect,
    timestampKey: sqliteTimestampKey,
    storedTimestamp: forms.writes === 'kandev' ? kandevTimestamp : (value) => value,
    timestampForms: { mixed: true, writes: forms.writes },
  };
}
