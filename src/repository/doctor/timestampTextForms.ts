import { isCanonicalTimestamp } from '../../timestamps.js';
import type { DialectName } from '../dialect.js';
import { catalogRows, type SchemaTarget } from '../schema/catalog.js';
import type { SchemaDetection } from '../schema/schemaMode.js';
import { SERVICE_TABLES, SERVICE_TABLE_NAMES, type ServiceTable } from '../schema/serviceTables.js';

/**
 * Which text forms the timestamp columns of a database hold, for `doctor`. Only classifies: reading
 * and writing each form is the repository's business (docs/schema.md, timestamp format).
 *
 * - `canonical`: this service's `YYYY-MM-DDTHH:MM:SS.fffffffffZ`;
 * - `kandev`: Kandev's Go SQLite driver, `YYYY-MM-DD HH:MM:SS[.f…]+00:00` (1 to 9 fractional digits,
 *   Go trims trailing zeros and drops a zero fraction);
 * - `sqlite_current_timestamp`: SQLite's `CURRENT_TIMESTAMP` default, `YYYY-MM-DD HH:MM:SS`
 *   (Kandev's `task_session_messages.updated_at DEFAULT CURRENT_TIMESTAMP`);
 * - `other`: anything else, including values SQLite stores as numbers.
 */
const TIMESTAMP_TEXT_FORMS = ['canonical', 'kandev', 'sqlite_current_timestamp', 'other'] as const;
export type TimestampTextForm = (typeof TIMESTAMP_TEXT_FORMS)[number];

const KANDEV_FORM = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?\+00:00$/;
const CURRENT_TIMESTAMP_FORM = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

/** The form of one stored value (not NULL). */
export function classifyTimestampText(value: unknown): TimestampTextForm {
  if (typeof value !== 'string') return 'other';
  if (isCanonicalTimestamp(value)) return 'canonical';
  if (KANDEV_FORM.test(value)) return 'kandev';
  if (CURRENT_TIMESTAMP_FORM.test(value)) return 'sqlite_current_timestamp';
  return 'other';
}

/** Every timestamp column the service reads or orders by: the `_at` columns of the tables it reads. */
const SERVICE_TIMESTAMP_COLUMNS: ReadonlyArray<{ readonly table: ServiceTable; readonly column: string }> = SERVICE_TABLE_NAMES.flatMap((table) =>
  SERVICE_TABLES[table].filter((column) => column.endsWith('_at')).map((column) => ({ table, column })),
);

/** Values of `other` shown per column, so a person sees what they are. */
const OTHER_EXAMPLES = 3;

export type TimestampColumnFinding =
  /** The table or the column does not exist (the schema findings say which). */
  | { readonly table: ServiceTable; readonly column: string; readonly kind: 'absent' }
  /** A PostgreSQL timestamp type: the column holds instants, not text, so there is no form to sample. */
  | { readonly table: ServiceTable; readonly column: string; readonly kind: 'native'; readonly type: string }
  | {
      readonly table: ServiceTable;
      readonly column: string;
      readonly kind: 'sampled';
      readonly type: string;
      /** Rows sampled, NULLs included. */
      readonly rows: number;
      readonly nulls: number;
      /** Non-NULL sampled values per form. */
      readonly forms: Readonly<Record<TimestampTextForm, number>>;
      /** A few distinct `other` values as found (numbers as their text and type). */
      readonly otherExamples: readonly string[];
    };

/** The forms a sampled column holds (count above zero), in TIMESTAMP_TEXT_FORMS order. */
export function formsFound(finding: TimestampColumnFinding): TimestampTextForm[] {
  return finding.kind === 'sampled' ? TIMESTAMP_TEXT_FORMS.filter((form) => finding.forms[form] > 0) : [];
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/**
 * Samples the newest `sampleRows` rows of every timestamp column the service reads and counts each
 * form. SQLite: newest by rowid (insertion order; Kandev's tables are rowid tables). PostgreSQL: a
 * column of a timestamp type is reported `native`; a column of another type (not Kandev's schema)
 * is sampled as text, newest by physical position (`ctid`), the last rows of an append-mostly table.
 */
/**
 * The newest rows' values of a column, as text: SQLite's rowid is insertion order; PostgreSQL's
 * physical order (ctid) is close to it for an append-mostly table, and only a sample is wanted.
 */
const NEWEST_TEXT: Record<DialectName, (column: string, table: string) => string> = {
  sqlite: (column, table) => `SELECT ${column} AS value FROM ${table} ORDER BY rowid DESC LIMIT ?`,
  postgres: (column, table) => `SELECT ${column}::text AS value FROM ${table} ORDER BY ctid DESC LIMIT ?`,
};

export async function sampleTimestampForms(target: SchemaTarget, detection: SchemaDetection, sampleRows: number): Promise<TimestampColumnFinding[]> {
  const findings: TimestampColumnFinding[] = [];
  for (const { table, column } of SERVICE_TIMESTAMP_COLUMNS) {
    const type = detection.tables.find((t) => t.table === table)?.columns.find((c) => c.name === column)?.type ?? null;
    if (type === null) {
      findings.push({ table, column, kind: 'absent' });
      continue;
    }
    if (target.dialect.timestampsAreInstants && /^timestamp\b/i.test(type)) {
      findings.push({ table, column, kind: 'native', type });
      continue;
    }
    const sql = NEWEST_TEXT[target.dialect.name](quote(column), quote(table));
    const rows = await catalogRows<{ value: unknown }>(target, sql, [sampleRows]);
    const forms: Record<TimestampTextForm, number> = { canonical: 0, kandev: 0, sqlite_current_timestamp: 0, other: 0 };
    const otherExamples: string[] = [];
    let nulls = 0;
    for (const { value } of rows) {
      if (value === null || value === undefined) {
        nulls += 1;
        continue;
      }
      const form = classifyTimestampText(value);
      forms[form] += 1;
      if (form !== 'other' || otherExamples.length >= OTHER_EXAMPLES) continue;
      const shown = typeof value === 'string' ? value : `${String(value)} (${typeof value})`;
      if (!otherExamples.includes(shown)) otherExamples.push(shown);
    }
    findings.push({ table, column, kind: 'sampled', type, rows: rows.length, nulls, forms, otherExamples });
  }
  return findings;
}
