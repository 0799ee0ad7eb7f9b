import { isTruthyFlag } from '../../turns/lifecycleTurn.js';
import type { DialectName, SqlDialect } from '../dialect.js';
import { catalogRows, type SchemaTarget } from '../schema/catalog.js';
import type { SchemaDetection } from '../schema/schemaMode.js';
import type { ServiceTable } from '../schema/serviceTables.js';

/**
 * Every metadata document of the tables whose metadata the service reads, checked the way the
 * service reads it (docs/schema.md, reading JSON metadata): a document that is not JSON, or whose
 * root is not an object, has no keys. Read in pages and parsed here rather than in SQL, because on
 * PostgreSQL only this service's `pp_safe_jsonb` can test a cast without failing the statement, and
 * `doctor` must run on a database its migrations never touched.
 */
const METADATA_TABLES = ['tasks', 'task_sessions', 'task_session_turns', 'task_session_messages'] as const satisfies readonly ServiceTable[];
type MetadataTable = (typeof METADATA_TABLES)[number];

/**
 * - `object`: a JSON object, read key by key;
 * - `null`: the column is NULL (no keys; Kandev's columns are nullable, nothing is wrong);
 * - `malformed`: not JSON the dialect's reader accepts (`''` included): read as no keys;
 * - `not_object`: JSON whose root is an array, a string, a number, `true`/`false` or `null`: no keys.
 */
export type MetadataState = 'object' | 'null' | 'malformed' | 'not_object';

// PostgreSQL's jsonb refuses what JSON.parse accepts in two places: a \u0000 escape, and an escaped
// lone surrogate. The service's pp_safe_jsonb then reads no keys (jsonNormalisation.test.ts).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function jsonbRefuses(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000') || LONE_SURROGATE.test(value);
  if (Array.isArray(value)) return value.some(jsonbRefuses);
  if (value !== null && typeof value === 'object') return Object.entries(value).some(([key, v]) => jsonbRefuses(key) || jsonbRefuses(v));
  return false;
}

/** How the service reads one stored metadata value on `dialect`; the parsed object when it has keys. */
export function classifyMetadata(
  raw: unknown,
  dialect: Pick<SqlDialect, 'jsonRefusesNulEscapes'>,
): { state: MetadataState; metadata?: Record<string, unknown> } {
  if (raw === null || raw === undefined) return { state: 'null' };
  if (typeof raw !== 'string') return { state: 'malformed' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return { state: 'malformed' };
  }
  if (dialect.jsonRefusesNulEscapes && jsonbRefuses(parsed)) return { state: 'malformed' };
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return { state: 'not_object' };
  return { state: 'object', metadata: parsed as Record<string, unknown> };
}

interface MetadataFinding {
  readonly table: MetadataTable;
  /** False when the table or one of `id`, `metadata` is missing: nothing was read. */
  readonly scanned: boolean;
  readonly rows: number;
  readonly nulls: number;
  readonly malformed: number;
  readonly notObject: number;
  /** Ids of the first few rows read as no keys (malformed or not an object), in scan order. */
  readonly exampleIds: readonly string[];
}

/**
 * The turn markers the current-turn rule reads (ADR 0001), counted over turns whose metadata is an
 * object and whose flag is truthy by the service's rule (`true`, 1, "true", "1").
 */
interface TurnMarkerCounts {
  readonly lifecycleOnly: number;
  readonly promptDispatchPending: number;
  readonly promptDispatchAttempted: number;
}

export interface MetadataScan {
  readonly tables: readonly MetadataFinding[];
  /** Null when task_session_turns could not be read. */
  readonly markers: TurnMarkerCounts | null;
}

export interface MetadataScanProgress {
  readonly table: MetadataTable;
  readonly scanned: number;
  readonly total: number;
}

const EXAMPLE_IDS = 3;
const PAGE_ROWS = 2000;

function present(detection: SchemaDetection, table: ServiceTable, columns: readonly string[]): boolean {
  const report = detection.tables.find((t) => t.table === table);
  return report !== undefined && report.present && columns.every((name) => report.columns.some((c) => c.name === name && c.present));
}

/**
 * Reads every row's metadata of METADATA_TABLES (read-only, in keyset pages: SQLite by rowid, which
 * also reaches a row whose TEXT id is NULL; PostgreSQL by id) and counts how each reads, plus the
 * turn markers. `onProgress` is told after every page.
 */
/**
 * The column a full scan pages by: SQLite's rowid also reaches a row whose TEXT id is NULL;
 * PostgreSQL has no rowid, and Kandev's ids are its primary keys.
 */
const SCAN_KEY: Record<DialectName, string> = { sqlite: 'rowid', postgres: 'id' };

export async function scanMetadata(
  target: SchemaTarget,
  detection: SchemaDetection,
  onProgress: (progress: MetadataScanProgress) => void = () => undefined,
): Promise<MetadataScan> {
  const tables: MetadataFinding[] = [];
  let markers: { lifecycleOnly: number; promptDispatchPending: number; promptDispatchAttempted: number } | null = null;
  const key = SCAN_KEY[target.dialect.name];
  for (const table of METADATA_TABLES) {
    if (!present(detection, table, ['id', 'metadata'])) {
      tables.push({ table, scanned: false, rows: 0, nulls: 0, malformed: 0, notObject: 0, exampleIds: [] });
      continue;
    }
    const isTurns = table === 'task_session_turns';
    const counts = { lifecycleOnly: 0, promptDispatchPending: 0, promptDispatchAttempted: 0 };
    const [counted] = await catalogRows<{ total: number | string }>(target, `SELECT COUNT(*) AS total FROM ${table}`);
    const total = Number(counted?.total ?? 0);
    let rows = 0;
    let nulls = 0;
    let malformed = 0;
    let notObject = 0;
    const exampleIds: string[] = [];
    let after: unknown;
    for (;;) {
      const page = await catalogRows<{ k: unknown; id: unknown; metadata: unknown }>(
        target,
        `SELECT ${key} AS k, id, metadata FROM ${table}${after === undefined ? '' : ` WHERE ${key} > ?`} ORDER BY ${key} LIMIT ${PAGE_ROWS}`,
        after === undefined ? [] : [after],
      );
      for (const row of page) {
        const { state, metadata } = classifyMetadata(row.metadata, target.dialect);
        if (state === 'null') nulls += 1;
        else if (state === 'malformed' || state === 'not_object') {
          if (state === 'malformed') malformed += 1;
          else notObject += 1;
          if (exampleIds.length < EXAMPLE_IDS) exampleIds.push(String(row.id));
        } else if (isTurns && metadata) {
          if (isTruthyFlag(metadata.lifecycle_only)) counts.lifecycleOnly += 1;
          if (isTruthyFlag(metadata.prompt_dispatch_pending)) counts.promptDispatchPending += 1;
          if (isTruthyFlag(metadata.prompt_dispatch_attempted)) counts.promptDispatchAttempted += 1;
        }
      }
      rows += page.length;
      onProgress({ table, scanned: rows, total: Math.max(total, rows) });
      if (page.length < PAGE_ROWS) break;
      after = page[page.length - 1]!.k;
    }
    tables.push({ table, scanned: true, rows, nulls, malformed, notObject, exampleIds });
    if (isTurns) markers = counts;
  }
  return { tables, markers };
}
