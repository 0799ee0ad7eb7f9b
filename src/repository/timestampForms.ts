import { rawRows, type RepositoryContext } from './context.js';
import type { TimestampForms } from './dialect.js';
import { storedTimestampForm, type TimestampForm } from '../timestamps.js';
import { TIMESTAMP_FORM_SETTINGS } from '../settingValues.js';

/**
 * Which timestamp texts a database's Kandev-owned tables hold, decided once when the database is
 * opened (src/bin/assembly.ts) and then fixed for the repository context built on it.
 *
 * The rule (docs/schema.md, "Timestamp forms"):
 * - PostgreSQL holds instants: nothing to detect, writes are canonical text it parses.
 * - SQLite: the newest rows of `task_session_turns.started_at` and `task_session_messages.created_at`
 *   (by rowid, i.e. insertion order) are sampled. Writes take Kandev's form when any sampled value is
 *   in it (Kandev is writing there, and its own `ORDER BY started_at` compares text), the canonical
 *   form when the sample is all canonical, and, on empty tables, Kandev's form only when the schema is
 *   Kandev's. Reads go through the normalised key unless the sample is all canonical and the schema
 *   is this service's own; a Kandev schema may receive Kandev's rows at any time.
 * - `TIMESTAMP_FORM=canonical|kandev` forces the written form; reads still follow the sample (forcing
 *   `kandev` implies normalised reads).
 */

type TimestampFormSetting = (typeof TIMESTAMP_FORM_SETTINGS)[number];

export interface TimestampFormOptions {
  /** `auto` (the default) detects; `canonical` or `kandev` forces the written form. */
  setting?: TimestampFormSetting;
  /** The schema's tables were created by Kandev, not by this service's migrations (schema ownership detection). */
  kandevSchema?: boolean;
}

export interface TimestampFormsDetection {
  readonly forms: TimestampForms;
  /** Sampled values per form (`other`: text in neither form); all zero on PostgreSQL. */
  readonly sampled: Readonly<Record<TimestampForm | 'other', number>>;
  /** One line for the logs: what was found and why that was chosen. */
  readonly reason: string;
}

/** Newest rows sampled per column: enough to see who writes now, cheap on any table size. */
const TIMESTAMP_SAMPLE_ROWS = 50;

export async function detectTimestampForms(ctx: RepositoryContext, options: TimestampFormOptions = {}): Promise<TimestampFormsDetection> {
  const setting = options.setting ?? 'auto';
  const sampled = { canonical: 0, kandev: 0, other: 0 };
  if (ctx.dialect.timestampsAreInstants) {
    return { forms: { mixed: false, writes: 'canonical' }, sampled, reason: 'PostgreSQL timestamp columns hold instants' };
  }
  // rowid order is insertion order; Kandev's tables have rowids (its own permission tie-break reads them).
  const rows = await rawRows<{ value: unknown }>(
    ctx,
    `SELECT value FROM (SELECT started_at AS value FROM task_session_turns ORDER BY rowid DESC LIMIT ${TIMESTAMP_SAMPLE_ROWS})
     UNION ALL
     SELECT value FROM (SELECT created_at AS value FROM task_session_messages ORDER BY rowid DESC LIMIT ${TIMESTAMP_SAMPLE_ROWS})`,
  );
  for (const { value } of rows) sampled[storedTimestampForm(String(value)) ?? 'other'] += 1;
  const kandevSchema = options.kandevSchema === true;
  const detected: TimestampForm = sampled.kandev > 0 ? 'kandev' : sampled.canonical > 0 ? 'canonical' : kandevSchema ? 'kandev' : 'canonical';
  const writes = setting === 'auto' ? detected : setting;
  const mixed = writes === 'kandev' || kandevSchema || sampled.kandev > 0 || sampled.other > 0;
  const found = rows.length === 0 ? 'no rows' : `${sampled.canonical} canonical, ${sampled.kandev} Kandev-form, ${sampled.other} other of the newest rows`;
  const why = setting === 'auto' ? 'detected' : `forced by TIMESTAMP_FORM=${setting}`;
  return {
    forms: { mixed, writes },
    sampled,
    reason: `${found}${kandevSchema ? ' (Kandev schema)' : ''}: writes ${writes} (${why}), ${mixed ? 'orders through the normalised key' : 'orders canonical text as stored'}`,
  };
}
