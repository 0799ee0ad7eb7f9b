import type { Config } from '../config.js';
import { coerceError } from '../errors.js';
import { redactSecretsOfUrl } from '../redaction.js';
import { createDatabase, SqliteFileMissingError } from '../repository/database.js';
import { inspectDatabase, type InspectionProgress } from '../repository/doctor/inspectDatabase.js';
import { unservedIndexes } from '../repository/schema/indexInspection.js';
import { doctorJson, doctorText, type DoctorReport } from './doctorReport.js';
import { judgeInspection, unreachableVerdict } from './doctorVerdict.js';
import { addIndexesCommandLine } from './migrateCommand.js';
import { createProgressReporter } from './progress.js';
import { databaseConnectionFailure } from './connectionFailure.js';
import { EXIT_CODES } from './exitCodes.js';
import type { DoctorSettings } from './commandSettings.js';

export interface DoctorOptions {
  readonly json: boolean;
  /** Newest rows sampled per timestamp column. */
  readonly sampleRows: number;
}

export const DEFAULT_SAMPLE_ROWS = 1000;
const MAX_SAMPLE_ROWS = 1_000_000;

/** `--sample N`: a whole number of rows from 1 to 1,000,000, or why not. */
export function parseSampleRows(value: string | undefined): { ok: true; rows: number } | { ok: false; message: string } {
  if (value === undefined) return { ok: true, rows: DEFAULT_SAMPLE_ROWS };
  const rows = Number(value);
  if (/^\d+$/.test(value) && rows >= 1 && rows <= MAX_SAMPLE_ROWS) return { ok: true, rows };
  return { ok: false, message: `--sample ${JSON.stringify(value)}: give a whole number of rows from 1 to ${MAX_SAMPLE_ROWS}` };
}

function progressLabel(progress: InspectionProgress): { key: string; label: string } {
  switch (progress.check) {
    case 'schema':
      return { key: 'schema', label: 'reading the catalog' };
    case 'indexes':
      return { key: 'indexes', label: 'reading the indexes' };
    case 'timestamps':
      return { key: 'timestamps', label: 'sampling the timestamp columns' };
    case 'open_turns':
      return { key: 'open_turns', label: 'counting open turns per session' };
    case 'foreign_writes':
      return { key: 'foreign_writes', label: 'reading the summary rows found written by another writer' };
    case 'metadata':
      return {
        key: `metadata:${progress.table}`,
        label: `reading the metadata of ${progress.table}: ${progress.scanned.toLocaleString('en-US')} of ${progress.total.toLocaleString('en-US')} rows`,
      };
  }
}

/** Progress on stderr, only for a check that has run a second or more; silent on a quick run. */
function slowCheckProgress(everyMs = 1000) {
  const reporter = createProgressReporter();
  let current: { key: string; label: string; since: number } | undefined;
  let shown = false;
  const timer = setInterval(() => {
    if (!current) return;
    const seconds = (performance.now() - current.since) / 1000;
    if (seconds * 1000 < everyMs) return;
    reporter.update(`doctor: ${current.label} (${seconds.toFixed(0)} s)`);
    shown = true;
  }, everyMs);
  timer.unref();
  return {
    update(progress: InspectionProgress) {
      const { key, label } = progressLabel(progress);
      current = current?.key === key ? { ...current, label } : { key, label, since: performance.now() };
    },
    stop() {
      clearInterval(timer);
      if (shown) reporter.done();
    },
  };
}

/**
 * `doctor`: reads the database read-only (SQLite opened read-only, PostgreSQL sessions
 * `default_transaction_read_only`), migrates nothing, and prints every finding with a verdict:
 * exit 0 the worker can run, 1 it can run with warnings, 2 it cannot (refused schema, database not
 * reachable). `json`: one JSON document instead (docs/doctor.md).
 */
export async function runDoctorCommand(config: DoctorSettings, options: DoctorOptions): Promise<number> {
  const write = (report: DoctorReport) => {
    process.stdout.write(options.json ? `${JSON.stringify(doctorJson(report), null, 2)}\n` : doctorText(report));
    return report.verdict.exitCode;
  };
  // The text report says it once, on its "cannot run:" line; beside a JSON document, stderr says it for a person.
  const cannotRun = (message: string, database: string, dialect: DoctorReport['dialect']) => {
    if (options.json) process.stderr.write(`pending-projector doctor: ${message}\n`);
    return write({ database, dialect, inspection: null, verdict: unreachableVerdict(message), addIndexesCommand: null });
  };
  let db;
  try {
    db = createDatabase(config.databaseUrl, { readOnly: true, maxConnections: 1, passwordFile: config.databasePasswordFile || undefined });
  } catch (err) {
    if (!(err instanceof SqliteFileMissingError)) throw err;
    return cannotRun(err.message, config.databaseUrl, 'sqlite');
  }
  const progress = slowCheckProgress();
  try {
    try {
      await db.knex.raw('SELECT 1');
    } catch (err) {
      // The one line every command prints for a connection that failed, naming DATABASE_URL.
      const failure = databaseConnectionFailure(err, db.description, (text) => redactSecretsOfUrl(text, config.databaseUrl));
      process.stderr.write(`pending-projector doctor: ${failure.message}\n`);
      const verdict = unreachableVerdict(failure.message, failure.exitCode === EXIT_CODES.unreachable ? 3 : 2);
      return write({ database: db.description, dialect: db.dialect.name, inspection: null, verdict, addIndexesCommand: null });
    }
    let inspection;
    try {
      inspection = await inspectDatabase(db, { schemaMode: config.schemaMode, sampleRows: options.sampleRows, onProgress: (p) => progress.update(p) });
    } catch (err) {
      // Reached, yet a read failed (a lost connection, a permission): the worker's reads would fail too.
      const message = `could not read the database ${db.description}: ${redactSecretsOfUrl(coerceError(err).message, config.databaseUrl)}`;
      progress.stop();
      return cannotRun(message, db.description, db.dialect.name);
    }
    progress.stop();
    const unserved = inspection.detection.shape !== 'empty' && unservedIndexes(inspection.indexes).length > 0;
    const addIndexesCommand = unserved ? addIndexesCommandLine({ description: db.description, schemaMode: config.schemaMode }) : null;
    return write({
      database: db.description,
      dialect: db.dialect.name,
      inspection,
      verdict: judgeInspection(inspection, addIndexesCommand),
      addIndexesCommand,
    });
  } finally {
    progress.stop();
    await db.destroy();
  }
}
