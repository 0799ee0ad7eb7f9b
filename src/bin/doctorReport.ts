import type { DialectName } from '../repository/dialect.js';
import type { DatabaseInspection } from '../repository/doctor/inspectDatabase.js';
import { formsFound, type TimestampColumnFinding } from '../repository/doctor/timestampTextForms.js';
import { unservedIndexes } from '../repository/schema/indexInspection.js';
import { describeForeignWrites, type DoctorVerdict } from './doctorVerdict.js';
import { describeUnservedIndex } from './migrateCommand.js';

/** One run of `doctor`: what it read (null when the database could not be reached) and its verdict. */
export interface DoctorReport {
  /** The database URL with any password masked. */
  readonly database: string;
  readonly dialect: DialectName | null;
  readonly inspection: DatabaseInspection | null;
  readonly verdict: DoctorVerdict;
  /** The command that adds the missing indexes to this database; null when none is missing. */
  readonly addIndexesCommand: string | null;
}

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function schemaLines(inspection: DatabaseInspection): string[] {
  const { decision, detection } = inspection;
  const lines: string[] = [];
  if (inspection.missingSchema) {
    // Every table reads as missing then: the mode detection would decide is not this database's.
    lines.push(`schema mode: not decided: the search_path (${inspection.missingSchema.searchPath}) selects no schema`);
  } else if (decision.ok) {
    lines.push(`schema mode: ${decision.mode} (${decision.because})`);
    lines.push(
      inspection.pendingMigrations.length
        ? `  migrations the worker applies at start (or pending-projector migrate): ${inspection.pendingMigrations.join(', ')}`
        : '  every migration of this mode is applied',
    );
  } else {
    lines.push(`schema mode: refused (SCHEMA_MODE=${inspection.setting}): ${decision.headline}`);
    for (const problem of decision.problems) lines.push(`  - ${problem}`);
  }
  lines.push('tables and columns the service reads (type as the catalog reports it):');
  for (const table of detection.tables) {
    if (!table.present) {
      lines.push(`  ${table.table}: MISSING`);
      continue;
    }
    lines.push(`  ${table.table}: present`);
    const width = Math.max(...table.columns.map((c) => c.name.length));
    for (const column of table.columns) lines.push(`    ${column.name.padEnd(width)}  ${column.present ? column.type || '(no declared type)' : 'MISSING'}`);
  }
  return lines;
}

function indexLines(report: DoctorReport, inspection: DatabaseInspection): string[] {
  const lines = ['indexes the current-turn queries need:'];
  if (inspection.detection.shape === 'empty') {
    lines.push("  none yet: on this empty database owned mode's migrations create them with the tables");
    return lines;
  }
  for (const index of inspection.indexes) lines.push(`  ${describeUnservedIndex(index)}`);
  const unserved = unservedIndexes(inspection.indexes);
  if (unserved.length > 0) {
    lines.push(`  ${unserved.length} of ${inspection.indexes.length} are not there: the queries work without them, only slower.`);
    if (report.addIndexesCommand) lines.push(`  Add them with: ${report.addIndexesCommand}`);
  }
  return lines;
}

function timestampLine(finding: TimestampColumnFinding): string {
  const name = `${finding.table}.${finding.column}`;
  switch (finding.kind) {
    case 'absent':
      return `  ${name}: not there`;
    case 'native':
      return `  ${name}: ${finding.type}, holds instants (no text form to sample)`;
    case 'sampled': {
      if (finding.rows === 0) return `  ${name}: no rows`;
      const forms = formsFound(finding).map((form) => `${form} ${finding.forms[form]}`);
      if (finding.nulls > 0) forms.push(`NULL ${finding.nulls}`);
      const flag = formsFound(finding).length > 1 ? '  MIXED' : finding.forms.other > 0 ? '  UNKNOWN FORM' : '';
      const examples = finding.otherExamples.length ? ` (other: ${finding.otherExamples.map((v) => JSON.stringify(v)).join(', ')})` : '';
      return `  ${name}: ${count(finding.rows, 'row')}: ${forms.join(', ')}${examples}${flag}`;
    }
  }
}

function timestampLines(inspection: DatabaseInspection): string[] {
  const sampled = inspection.timestamps.some((f) => f.kind === 'sampled');
  const head =
    inspection.dialect === 'postgres' && !sampled
      ? 'timestamp forms: PostgreSQL timestamp columns hold instants, not text, so there is no form to sample:'
      : `timestamp forms, newest ${inspection.sampleRows} rows of each column${inspection.dialect === 'sqlite' ? ' by rowid' : ''}; canonical = …THH:MM:SS.fffffffffZ, kandev = … HH:MM:SS[.f]+00:00, sqlite_current_timestamp = … HH:MM:SS:`;
  return [head, ...inspection.timestamps.map(timestampLine)];
}

function metadataLines(inspection: DatabaseInspection): string[] {
  const lines = ['metadata (every row; the service reads NULL, malformed and non-object metadata as "no keys"):'];
  for (const table of inspection.metadata.tables) {
    if (!table.scanned) {
      lines.push(`  ${table.table}: not read (the table or its id/metadata column is missing)`);
      continue;
    }
    const parts = [
      table.malformed ? `${table.malformed} not valid JSON` : '',
      table.notObject ? `${table.notObject} JSON but not an object` : '',
      table.nulls ? `${table.nulls} NULL` : '',
    ].filter(Boolean);
    const examples = table.exampleIds.length ? ` (e.g. ${table.exampleIds.join(', ')})` : '';
    lines.push(
      `  ${table.table}: ${count(table.rows, 'row')}${parts.length ? `: ${parts.join(', ')}${examples}` : table.rows ? ', every one a JSON object' : ''}`,
    );
  }
  return lines;
}

function turnLines(inspection: DatabaseInspection): string[] {
  const lines: string[] = [];
  const several = inspection.openTurns;
  if (!several) lines.push('open turns: not read (task_session_turns or its task_session_id/completed_at column is missing)');
  else if (several.sessions === 0) lines.push('open turns: no session has more than one open turn');
  else {
    const examples = several.examples.map((e) => `${e.sessionId} (${e.openTurns})`).join(', ');
    lines.push(`open turns: ${count(several.sessions, 'session has', 'sessions have')} more than one open turn: ${examples}`);
  }
  const markers = inspection.metadata.markers;
  lines.push(
    markers
      ? `turn markers: lifecycle_only ${markers.lifecycleOnly}, prompt_dispatch_pending ${markers.promptDispatchPending}, prompt_dispatch_attempted ${markers.promptDispatchAttempted}`
      : 'turn markers: not read',
  );
  return lines;
}

function foreignWriteLines(inspection: DatabaseInspection): string[] {
  const foreign = inspection.foreignWrites;
  if (!foreign) return ["summary rows written by another writer: not read (this service's record of its summary writes is not there yet)"];
  if (foreign.tasks === 0) return [`summary rows written by another writer: none found by the worker in the last ${foreign.hours} hours`];
  return [
    `summary rows written by another writer, changing fields this service owns, in the last ${foreign.hours} hours: ${count(foreign.tasks, 'task')}, newest first: ${describeForeignWrites(foreign)}`,
  ];
}

/** The report for a person, ending with the verdict line. */
export function doctorText(report: DoctorReport): string {
  const lines = [`database: ${report.database}${report.dialect ? ` (${report.dialect})` : ''}`];
  const { inspection, verdict } = report;
  if (inspection) {
    lines.push(
      ...schemaLines(inspection),
      ...indexLines(report, inspection),
      ...timestampLines(inspection),
      ...metadataLines(inspection),
      ...turnLines(inspection),
      ...foreignWriteLines(inspection),
    );
  }
  // The schema's problems are listed under the schema mode; a database that was not reached has only its own.
  for (const problem of verdict.problems) if (problem.check === 'database') lines.push(`cannot run: ${problem.message}`);
  if (verdict.warnings.length) lines.push('warnings:', ...verdict.warnings.map((w) => `  - [${w.check}] ${w.message}`));
  lines.push(`verdict: ${verdict.summary}`);
  return `${lines.join('\n')}\n`;
}

function timestampJson(finding: TimestampColumnFinding) {
  const base = { table: finding.table, column: finding.column, kind: finding.kind };
  if (finding.kind === 'absent') return { ...base, type: null, rows: null, nulls: null, forms: null, other_examples: [] };
  if (finding.kind === 'native') return { ...base, type: finding.type, rows: null, nulls: null, forms: null, other_examples: [] };
  return { ...base, type: finding.type, rows: finding.rows, nulls: finding.nulls, forms: { ...finding.forms }, other_examples: finding.otherExamples };
}

/** The report for a program: one JSON document, shape in docs/doctor.md. */
export function doctorJson(report: DoctorReport): Record<string, unknown> {
  const { inspection: i, verdict } = report;
  return {
    database: report.database,
    dialect: report.dialect,
    reachable: i !== null,
    schema: i && {
      setting: i.setting,
      shape: i.detection.shape,
      mode: i.decision.ok ? i.decision.mode : null,
      because: i.decision.ok ? i.decision.because : null,
      refused: i.decision.ok ? null : { headline: i.decision.headline, problems: i.decision.problems },
      search_path_schema_missing: i.missingSchema && { search_path: i.missingSchema.searchPath, create_schema: i.missingSchema.createSchema },
      pending_migrations: i.pendingMigrations,
      tables: i.detection.tables.map((t) => ({
        table: t.table,
        present: t.present,
        columns: t.columns.map((c) => ({ name: c.name, present: c.present, type: c.type })),
      })),
      missing_tables: i.detection.missingTables,
      missing_columns: i.detection.missingColumns,
    },
    indexes: i && {
      created_by_migrations: i.detection.shape === 'empty',
      required: i.indexes.map((x) => ({
        name: x.index.name,
        table: x.index.table,
        state: x.state,
        serves: x.index.serves,
        found: x.found ?? null,
        create: x.index.create,
      })),
      add_indexes_command: report.addIndexesCommand,
    },
    timestamps: i && { sample_rows: i.sampleRows, columns: i.timestamps.map(timestampJson) },
    metadata:
      i &&
      i.metadata.tables.map((t) => ({
        table: t.table,
        scanned: t.scanned,
        rows: t.rows,
        nulls: t.nulls,
        malformed: t.malformed,
        not_object: t.notObject,
        example_ids: t.exampleIds,
      })),
    open_turns: i?.openTurns
      ? { sessions: i.openTurns.sessions, examples: i.openTurns.examples.map((e) => ({ session_id: e.sessionId, open_turns: e.openTurns })) }
      : null,
    turn_markers: i?.metadata.markers
      ? {
          lifecycle_only: i.metadata.markers.lifecycleOnly,
          prompt_dispatch_pending: i.metadata.markers.promptDispatchPending,
          prompt_dispatch_attempted: i.metadata.markers.promptDispatchAttempted,
        }
      : null,
    foreign_summary_writes: i?.foreignWrites
      ? {
          hours: i.foreignWrites.hours,
          tasks: i.foreignWrites.tasks,
          examples: i.foreignWrites.examples.map((w) => ({ task_id: w.taskId, revision: w.revision, fields: w.fields, seen_at: w.seenAt, count: w.count })),
        }
      : null,
    problems: verdict.problems,
    warnings: verdict.warnings,
    verdict: { exit_code: verdict.exitCode, status: verdict.status, summary: verdict.summary },
  };
}
