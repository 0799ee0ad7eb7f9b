/**
 * The one harness every benchmark runs in. A bench declares its options, measures one dialect at a
 * time and returns that dialect's figures as rows; the harness parses the command line (`--dialect`
 * for all), prints the header (machine, versions, date: figures of two runs compare only when these
 * agree), each dialect's table, the Markdown summary of every dialect with the targets met, and
 * owns progress, cleanups and the exit code. A bench that completed exits 0 whatever its verdicts
 * (PASS and FAIL are printed results); 2 for bad arguments, 1 when it could not run, 130 after a
 * signal.
 */
import fs from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createDatabase } from '../src/repository/database.js';
import type { DialectName } from '../src/repository/dialect.js';

export class UsageError extends Error {
  override name = 'UsageError';
  readonly code = 'BENCH_USAGE';
}

/** The system under test answered wrongly: the run stops, since its figures would mean nothing. */
export class WrongAnswerError extends Error {
  override name = 'WrongAnswerError';
  readonly code = 'BENCH_WRONG_ANSWER';
}

/**
 * Checks an answer of the system under test: a WrongAnswerError naming every field of `actual` that
 * is not `===` its value in `expected`, with `actual` itself (cut short) for the rest.
 */
export function expectFields(what: string, actual: object, expected: Record<string, unknown>): void {
  const got = actual as Record<string, unknown>;
  const wrong = Object.entries(expected).filter(([key, value]) => got[key] !== value);
  if (wrong.length === 0) return;
  const fields = wrong.map(([key, value]) => `${key} ${JSON.stringify(got[key])} (expected ${JSON.stringify(value)})`).join(', ');
  throw new WrongAnswerError(`${what}: ${fields}; got ${JSON.stringify(actual).slice(0, 600)}`);
}

export const progress = (line: string): void => void process.stderr.write(`${line}\n`);
export const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const cleanups = new Set<() => Promise<void>>();

/** Registers `fn` to run at the end of the run, after an error or on a signal; the returned function runs it now instead (once). */
export function onCleanup(fn: () => Promise<unknown>): () => Promise<void> {
  let done: Promise<void> | undefined;
  const once = () =>
    (done ??= fn().then(
      () => undefined,
      (err: Error) => progress(`cleanup failed: ${err.message}`),
    ));
  cleanups.add(once);
  return async () => {
    await once();
    cleanups.delete(once);
  };
}

/** Newest first: workers before streams before connections before databases. */
async function runCleanups(): Promise<void> {
  for (const fn of [...cleanups].reverse()) await fn();
  cleanups.clear();
}

// Measuring -----------------------------------------------------------------------------------

/** Nearest-rank percentile of an unsorted list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Per-operation wall times (ms) and the throughput of the whole loop (operations per second). */
export interface Timed {
  samples: number[];
  opsPerSec: number;
}

/** Runs `fn` once per item, one at a time, timing each call; a `fn` that returns a number reports its own sample (ms). */
export async function timeEach<T>(items: readonly T[], fn: (item: T) => Promise<number | void>): Promise<Timed> {
  const samples: number[] = [];
  const start = performance.now();
  for (const item of items) {
    const t0 = performance.now();
    const reported = await fn(item);
    samples.push(typeof reported === 'number' ? reported : performance.now() - t0);
  }
  return { samples, opsPerSec: items.length / ((performance.now() - start) / 1000) };
}

/** Runs `fn` once per item with `concurrency` calls in flight; returns items per second. */
export async function inFlight<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<unknown>): Promise<number> {
  let next = 0;
  const start = performance.now();
  const lane = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return items.length / ((performance.now() - start) / 1000);
}

export interface Latency {
  p50: number;
  p99: number;
  opsPerSec: number;
}

export const latencyOf = (t: Timed): Latency => ({ p50: percentile(t.samples, 50), p99: percentile(t.samples, 99), opsPerSec: t.opsPerSec });

// Printing ------------------------------------------------------------------------------------

/** A figure: what was measured, its value, the target it is held to ('' for context), the result or a note. */
export type Row = readonly [metric: string, value: string, target: string, result: string];

export const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : String(n));
export const f1 = (n: number) => n.toFixed(1);
export const f2 = (n: number) => n.toFixed(2);
export const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
export const pair = (l: Latency) => `${f2(l.p50)} / ${f2(l.p99)}`;
export const latencyCell = (l: Latency) => `p50 ${f2(l.p50)}, p99 ${f2(l.p99)} ms`;
export const DIALECT_TITLE = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;

function textTable(rows: readonly Row[]): string[] {
  const all: Row[] = [['measured', 'value', 'target', 'result'], ...rows];
  const widths = [0, 1, 2].map((i) => Math.max(...all.map((row) => row[i]!.length)));
  const cell = (c: string, i: number) => (i === 3 ? c : i === 1 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!));
  return all.map((cells) => `  ${cells.map(cell).join('  ')}`.trimEnd());
}

function markdownTable(columns: readonly string[], lines: ReadonlyArray<readonly string[]>): string[] {
  const row = (cells: readonly string[]) => `| ${cells.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`;
  return [row(columns), `|${columns.map(() => '---').join('|')}|`, ...lines.map(row)];
}

/** One dialect's figures as a bench hands them to the harness. */
export interface DialectResult {
  dialect: DialectName;
  /** Follows the dialect's name in its heading. */
  heading?: string;
  /** Lines between the heading and the table, and after the table. */
  intro?: string[];
  after?: string[];
  rows: Row[];
  /** The summary's lines, [what, this dialect's cell, target]: every dialect lists the same, in the same order. */
  summary: ReadonlyArray<readonly [string, string, string]>;
  /** One per target: met or not. */
  checks: boolean[];
}

// Machine and versions ------------------------------------------------------------------------

export interface RunInfo {
  date: string;
  cpu: string;
  cores: number;
  versions: { sqlite: string; postgres: string; natsServer: string };
}

async function serverVersion(url: string, sql: string): Promise<string> {
  const db = createDatabase(url, { maxConnections: 1 });
  try {
    const result = (await db.knex.raw(sql)) as Array<{ v: string }> | { rows: Array<{ v: string }> };
    return (Array.isArray(result) ? result : result.rows)[0]?.v ?? 'unknown';
  } finally {
    await db.destroy();
  }
}

async function natsServerVersion(url: string): Promise<string> {
  const nc = await connect({ servers: url, timeout: 2000, reconnect: false });
  try {
    return nc.info?.version ?? 'unknown';
  } finally {
    await nc.close();
  }
}

/** Probes each service once; one that does not answer is reported as such (the bench says whether it needs it). */
async function runInfoLines(urls: Services): Promise<{ info: RunInfo; lines: string[] }> {
  const unreachable = (err: unknown) => `not reachable (${(err as Error).message.split('\n')[0]})`;
  const [sqlite, postgres, natsServer] = await Promise.all([
    serverVersion('sqlite::memory:', 'SELECT sqlite_version() AS v').catch(unreachable),
    serverVersion(urls.postgresUrl, "SELECT current_setting('server_version') AS v").catch(unreachable),
    natsServerVersion(urls.natsUrl).catch(unreachable),
  ]);
  const cpus = os.cpus();
  const info = { date: new Date().toISOString(), cpu: cpus[0]?.model.trim() ?? 'unknown CPU', cores: cpus.length, versions: { sqlite, postgres, natsServer } };
  const load = os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
  return {
    info,
    lines: [
      `date:     ${info.date}`,
      `machine:  ${info.cpu}, ${info.cores} cores, ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB RAM, load average ${load} (1, 5, 15 min)`,
      `versions: node ${process.version}, SQLite ${sqlite}, PostgreSQL ${postgres}, nats-server ${natsServer}`,
    ],
  };
}

// The command line and the run ----------------------------------------------------------------

export interface Services {
  postgresUrl: string;
  natsUrl: string;
}

/** An option beyond `--dialect`: a value (`arg` names it in the synopsis) or a flag. */
export interface OptionSpec {
  arg?: string;
  default?: string;
  /** Continuation lines are indented under the first. */
  help: string;
}

type Values = Record<string, string | boolean | undefined>;

/** Reads the parsed options, gathering every problem so one run names them all. */
export class OptionReader {
  readonly problems: string[] = [];
  constructor(private readonly values: Values) {}

  /** An integer option of at least `min`. */
  int(name: string, min: number): number {
    const n = Number(this.values[name]);
    if (!Number.isInteger(n) || n < min) this.problems.push(`--${name} must be an integer >= ${min} (got ${String(this.values[name])})`);
    return n;
  }

  string(name: string): string | undefined {
    return this.values[name] as string | undefined;
  }

  flag(name: string): boolean {
    return this.values[name] === true;
  }

  problem(message: string): void {
    this.problems.push(message);
  }
}

export interface Bench<O> {
  /** The npm script, e.g. `bench:queries`. */
  script: string;
  /** What the run compares, for the first line. */
  title: string;
  options: Record<string, OptionSpec>;
  parse(read: OptionReader, dialects: readonly DialectName[]): O;
  /** Lines after the header's options line. */
  header?(options: O): string[];
  measure(dialect: DialectName, options: O, services: BenchServices): Promise<DialectResult>;
  /** Lines after the summary (the worker bench's chart). */
  finish?(results: readonly DialectResult[], options: O, info: RunInfo): string[];
}

export interface BenchServices extends Services {
  /** One connection shared by every dialect, drained at the end. */
  nats(): Promise<NatsConnection>;
}

const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/** What a bench measures and its targets: its section of bench/README.md, so the two never disagree. */
function about(script: string): string {
  const readme = fs.readFileSync(new URL('README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf(`## \`npm run ${script}\``));
  return /```text\n([\s\S]*?)```/.exec(section)?.[1]?.trim() ?? '';
}

function usage(bench: Bench<unknown>): string {
  const options: Array<[string, OptionSpec]> = [
    ['dialect', { arg: 'sqlite|postgres|both', default: 'both', help: 'sqlite, postgres or both' }],
    ...Object.entries(bench.options),
  ];
  const width = Math.max(...options.map(([name]) => name.length)) + 4;
  const synopsis = options.map(([name, o]) => `[--${name}${o.arg ? ` ${o.arg}` : ''}]`).join(' ');
  const described = [...options, ['help', { help: 'this text' }] as [string, OptionSpec]].map(([name, o]) => {
    const help = `${o.help}${o.default === undefined ? '' : ` (default ${o.default})`}`;
    return `  ${`--${name}`.padEnd(width)}${help.replaceAll('\n', `\n  ${' '.repeat(width)}`)}`;
  });
  return [
    `npm run ${bench.script} -- ${synopsis}`,
    '',
    about(bench.script),
    '',
    'Options:',
    ...described,
    '',
    `PostgreSQL: BENCH_POSTGRES_URL, else POSTGRES_URL, else ${DEFAULT_POSTGRES_URL}; server settings ride on the URL`,
    `(...?options=-c%20jit%3Doff). NATS: NATS_URL (default ${DEFAULT_NATS_URL}). Progress goes to stderr, results to stdout.`,
    'Exit code: 0 when the run completed, whatever its verdicts (PASS and FAIL are printed results); 2 for bad',
    'arguments; 1 when it could not run (a service not reachable, an error, or a wrong answer, which leaves the',
    'figures meaningless). Streams, KV buckets, schemas and temp files are removed at the end, also after an error',
    'or a first SIGINT/SIGTERM.',
  ].join('\n');
}

function parseCommandLine<O>(bench: Bench<O>): { options: O; dialects: DialectName[]; line: string } {
  if (process.argv.slice(2).some((arg) => arg === '--help' || arg === '-h')) {
    process.stdout.write(`${usage(bench as Bench<unknown>)}\n`);
    process.exit(0);
  }
  const config = Object.fromEntries(
    Object.entries({ dialect: { arg: 'x', default: 'both' }, ...bench.options }).map(([name, o]) => [
      name,
      o.arg ? { type: 'string' as const, default: o.default } : { type: 'boolean' as const, default: false },
    ]),
  );
  let values: Values;
  try {
    values = parseArgs({ strict: true, allowPositionals: false, options: config }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const read = new OptionReader(values);
  const raw = read.string('dialect')!;
  const dialects: DialectName[] = raw === 'both' ? ['sqlite', 'postgres'] : raw === 'sqlite' || raw === 'postgres' ? [raw] : [];
  if (dialects.length === 0) read.problem(`--dialect must be sqlite, postgres or both (got ${raw})`);
  const options = bench.parse(read, dialects);
  if (read.problems.length > 0) throw new UsageError(`bad arguments:\n  ${read.problems.join('\n  ')}`);
  const line = Object.entries(values)
    .filter(([, v]) => v !== undefined && v !== false)
    .map(([name, v]) => (v === true ? `--${name}` : `--${name} ${name === 'dialect' ? dialects.join('+') : String(v)}`))
    .join(' ');
  return { options, dialects, line };
}

function formatDialect(r: DialectResult): string[] {
  return ['', `== ${DIALECT_TITLE[r.dialect]}${r.heading ? `: ${r.heading}` : ''} ==`, ...(r.intro ?? []), ...textTable(r.rows), ...(r.after ?? [])];
}

function formatSummary(script: string, results: readonly DialectResult[]): string[] {
  const lines = (results[0]?.summary ?? []).map(([what, , target], i) => [what, ...results.map((r) => r.summary[i]?.[1] ?? ''), target]);
  const met = results.map((r) => `${DIALECT_TITLE[r.dialect]} ${r.checks.filter(Boolean).length} of ${r.checks.length}`);
  return [
    'summary:',
    ...markdownTable([`npm run ${script}`, ...results.map((r) => DIALECT_TITLE[r.dialect]), 'target'], lines),
    `targets met: ${met.join(', ')}`,
  ];
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err instanceof UsageError) return err.message;
  // Knex quotes the whole failed statement before the driver's reason; a bulk INSERT is megabytes.
  const message = err.message.length > 1500 ? `${err.message.slice(0, 300)} [...] ${err.message.slice(-800)}` : err.message;
  const frames = (err.stack ?? '')
    .split('\n')
    .filter((l) => /^\s+at /.test(l))
    .slice(0, 8);
  return [`${err.name}: ${message}`, ...frames].join('\n');
}

async function main<O>(bench: Bench<O>): Promise<void> {
  const started = performance.now();
  const { options, dialects, line } = parseCommandLine(bench);
  const services: Services = {
    postgresUrl: process.env.BENCH_POSTGRES_URL ?? process.env.POSTGRES_URL ?? DEFAULT_POSTGRES_URL,
    natsUrl: process.env.NATS_URL ?? DEFAULT_NATS_URL,
  };
  let nc: Promise<NatsConnection> | undefined;
  const nats = () =>
    (nc ??= connect({ servers: services.natsUrl }).then((c) => {
      onCleanup(() => c.drain());
      return c;
    }));
  const out = (lines: readonly string[]) => process.stdout.write(`${lines.join('\n')}\n`);
  const { info, lines } = await runInfoLines(services);
  out([`npm run ${bench.script}: ${bench.title}`, ...lines, `options:  ${line}`, ...(bench.header?.(options) ?? [])]);
  const results: DialectResult[] = [];
  for (const dialect of dialects) {
    const result = await bench.measure(dialect, options, { ...services, nats });
    out(formatDialect(result));
    results.push(result);
  }
  out(['', ...formatSummary(bench.script, results), ...(bench.finish?.(results, options, info) ?? []), `wall time ${secs(performance.now() - started)}`]);
}

/** Runs a benchmark under the exit-code rule above. */
export function runBench<O>(bench: Bench<O>): void {
  const name = `npm run ${bench.script}`;
  let interrupted = false;
  const onSignal = (signal: string) => {
    interrupted = true;
    progress(`${signal}: cleaning up`);
    void runCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', () => onSignal('SIGINT'));
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  main(bench)
    .then(runCleanups)
    .then(
      () => {
        process.exitCode = 0;
      },
      async (err: unknown) => {
        // The cleanups a signal started close what main was using; its error says nothing then.
        if (interrupted) return;
        process.stderr.write(`${name} could not run: ${describeError(err)}\n`);
        if (err instanceof UsageError) process.stderr.write(`(${name} -- --help lists the options)\n`);
        await runCleanups();
        process.exitCode = err instanceof UsageError ? 2 : 1;
      },
    );
}
