import type { RecentForeignWrites } from '../repository/doctor/foreignWrites.js';
import type { DatabaseInspection } from '../repository/doctor/inspectDatabase.js';
import { formsFound, type TimestampColumnFinding } from '../repository/doctor/timestampTextForms.js';
import { unservedIndexes } from '../repository/schema/indexInspection.js';
import { plural } from './plural.js';
import { describeMissingSearchPathSchema } from '../repository/schema/searchPath.js';

/**
 * What `doctor` makes of an inspection: the problems that stop the worker (exit 2), the warnings it
 * runs with (exit 1), or neither (exit 0). docs/doctor.md lists every case.
 */

type DoctorCheck = 'database' | 'schema' | 'indexes' | 'timestamps' | 'metadata' | 'open_turns' | 'foreign_writes';

interface DoctorFinding {
  readonly check: DoctorCheck;
  readonly message: string;
}

export interface DoctorVerdict {
  readonly exitCode: 0 | 1 | 2 | 3;
  readonly status: 'ok' | 'warnings' | 'cannot_run';
  /** The verdict line, for a person. */
  readonly summary: string;
  readonly problems: readonly DoctorFinding[];
  readonly warnings: readonly DoctorFinding[];
}

/** Why a column's forms matter: SQLite compares the stored text, and only some mixes keep text order equal to time order. */
function timestampFormsWarning(finding: Extract<TimestampColumnFinding, { kind: 'sampled' }>): string | undefined {
  const forms = formsFound(finding);
  const known = forms.filter((form) => form !== 'other');
  const name = `${finding.table}.${finding.column}`;
  const parts: string[] = [];
  if (forms.length > 1) {
    const counts = forms.map((form) => `${form} ${finding.forms[form]}`).join(', ');
    parts.push(`${name} holds more than one timestamp form (newest ${finding.rows} rows: ${counts})`);
  }
  if (known.length > 1) {
    parts.push(
      known.includes('canonical')
        ? "SQLite compares these values as text, and a canonical value ('T' after the date) sorts after every space-separated value of the same day whatever its time, so a plain ORDER BY on this column (as Kandev's queries use) is not time order"
        : 'both forms are space-separated, so their text order follows time order, but one instant written in both forms compares unequal as text (05:06:07 against 05:06:07+00:00)',
    );
    parts.push(
      "the worker sees the mix when it starts and orders these values by their instant through one normalised key, which the index report above accounts for (docs/schema.md, 'Timestamp forms: beside Kandev's rows')",
    );
  }
  if (finding.forms.other > 0) {
    const examples = finding.otherExamples.map((v) => JSON.stringify(v)).join(', ');
    parts.push(
      `${plural(finding.forms.other, 'sampled value')} of ${name} in none of the known forms (${examples}): how they order against other values is not known`,
    );
  }
  return parts.length ? `${parts.join('; ')}` : undefined;
}

/** The recent foreign writes for a person: `task (fields, revision r, seen n times)`. */
export function describeForeignWrites(foreign: RecentForeignWrites): string {
  return foreign.examples.map((w) => `${w.taskId} (${w.fields.join(', ')}, revision ${w.revision}, ${plural(w.count, 'time')} in all)`).join('; ');
}

/** `addIndexesCommand`: the command line that adds the missing indexes to this database, named in the warning. */
export function judgeInspection(inspection: DatabaseInspection, addIndexesCommand: string | null = null): DoctorVerdict {
  const problems: DoctorFinding[] = [];
  const warnings: DoctorFinding[] = [];
  const { decision, detection } = inspection;
  // First: it explains every other finding (the database only looks empty).
  if (inspection.missingSchema) problems.push({ check: 'database', message: describeMissingSearchPathSchema(inspection.missingSchema) });
  if (!decision.ok) {
    problems.push({ check: 'schema', message: `refused: ${decision.headline}` });
    for (const problem of decision.problems) problems.push({ check: 'schema', message: problem });
  }

  // On an empty database owned mode's migrations create the indexes with the tables.
  const unserved = detection.shape === 'empty' ? [] : unservedIndexes(inspection.indexes);
  if (unserved.length > 0) {
    const states = unserved.map((i) => `${i.index.name} ${i.state}`).join(', ');
    const add = addIndexesCommand ? `; add them with: ${addIndexesCommand}` : '';
    warnings.push({
      check: 'indexes',
      message: `${unserved.length} of ${inspection.indexes.length} indexes the current-turn queries need are not there (${states}): the queries work without them, only slower${add}`,
    });
  }

  for (const finding of inspection.timestamps) {
    if (finding.kind !== 'sampled') continue;
    const message = timestampFormsWarning(finding);
    if (message) warnings.push({ check: 'timestamps', message });
  }

  for (const table of inspection.metadata.tables) {
    if (table.malformed + table.notObject === 0) continue;
    const what = [
      table.malformed ? `${plural(table.malformed, 'row')} whose metadata is not valid JSON` : '',
      table.notObject ? `${plural(table.notObject, 'row')} whose metadata is JSON but not an object` : '',
    ].filter(Boolean);
    const kandev = table.malformed ? "; Kandev's own JSON queries raise an error on such a row" : '';
    warnings.push({
      check: 'metadata',
      message: `${table.table}: ${what.join(' and ')} (e.g. ${table.exampleIds.join(', ')}): the service reads such metadata as "no keys" (no flag, no status, no pending_id)${kandev}`,
    });
  }

  const several = inspection.openTurns;
  if (several && several.sessions > 0) {
    const examples = several.examples.map((e) => `${e.sessionId} (${e.openTurns})`).join(', ');
    warnings.push({
      check: 'open_turns',
      message: `${plural(several.sessions, 'session has', 'sessions have')} more than one open turn (completed_at IS NULL), e.g. ${examples}: the current-turn rule picks the first eligible one in D1 order (open, then started_at, created_at, id, newest first; ADR 0001)`,
    });
  }

  // A warning, not a refusal: the worker runs and rewrites its fields at each projection; the
  // second writer, outside it, is what to stop.
  const foreign = inspection.foreignWrites;
  if (foreign && foreign.tasks > 0) {
    warnings.push({
      check: 'foreign_writes',
      message:
        `${plural(foreign.tasks, "task's summary row was", "tasks' summary rows were")} written by another writer in the last ${foreign.hours} hours, ` +
        `changing fields this service owns (e.g. ${describeForeignWrites(foreign)}): the two writers alternate revisions; stop the other writer ` +
        'from writing them (docs/kandev.md#one-owner-per-field)',
    });
  }

  if (problems.length > 0) {
    if (inspection.missingSchema) {
      return {
        exitCode: 2,
        status: 'cannot_run',
        summary: `the worker cannot run: the search_path of DATABASE_URL selects no schema (${inspection.missingSchema.searchPath})`,
        problems,
        warnings,
      };
    }
    const headline = decision.ok ? problems[0]!.message : decision.headline;
    return { exitCode: 2, status: 'cannot_run', summary: `the worker cannot run on this database: ${headline}`, problems, warnings };
  }
  const mode = decision.ok ? decision.mode : 'refused';
  if (warnings.length > 0) {
    return {
      exitCode: 1,
      status: 'warnings',
      summary: `the worker can run (schema mode ${mode}), with ${plural(warnings.length, 'warning')}`,
      problems,
      warnings,
    };
  }
  return { exitCode: 0, status: 'ok', summary: `the worker can run (schema mode ${mode})`, problems, warnings };
}

/**
 * The verdict when the database could not be reached, opened or read: no finding stands. Exit 2,
 * or 3 (`exitCode`) when nothing answered: the EXIT_CODES of every command.
 */
export function unreachableVerdict(message: string, exitCode: 2 | 3 = 2): DoctorVerdict {
  return {
    exitCode,
    status: 'cannot_run',
    summary: 'the worker cannot run: the database cannot be reached or read',
    problems: [{ check: 'database', message }],
    warnings: [],
  };
}
