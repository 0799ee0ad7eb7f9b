/**
 * What a phase of the worker bench costs, read before and after it: the CPU seconds of the bench
 * process (the in-process worker or the floor, beside the bench's publisher and summary watcher), of
 * the nats-server behind NATS_URL and of the run's own PostgreSQL backends (its application_name);
 * the database statements and transactions issued on the run's pool (as knex issues them); on
 * PostgreSQL the rows read and written in the run's schema (pg_stat_user_tables, after every pool
 * connection flushed its statistics) and the WAL the whole cluster wrote meanwhile; and what the
 * phase put on the bus (stream state deltas).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { Topology } from '../src/contract/subjects.js';
import { rawRows, type RepositoryContext } from '../src/repository/context.js';
import { sleep } from './harness.js';

// Marks the meter's own statements, which the statement count leaves out.
const OWN = '/* cost meter */';
const TICKS_PER_SECOND = 100;

export interface PhaseCost {
  events: number;
  cpuSeconds: { process: number; nats: number; postgres: number };
  statements: number;
  transactions: number;
  /** PostgreSQL only. */
  rowsRead: number;
  rowsWritten: number;
  walBytes: number;
  summaries: number;
  sessionEvents: number;
  outputBytes: number;
  eventBytes: number;
}

type Sample = Omit<PhaseCost, 'events' | 'cpuSeconds'> & { ticks: Map<number, number>; pids: { process: number[]; nats: number[]; postgres: number[] } };

export const addCosts = (a: PhaseCost, b: PhaseCost): PhaseCost => {
  const add = (x: Record<string, number>, y: Record<string, number>) => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, v + y[k]!]));
  const { cpuSeconds, ...rest } = a;
  return {
    ...(add(rest, b as unknown as Record<string, number>) as Omit<PhaseCost, 'cpuSeconds'>),
    cpuSeconds: add(cpuSeconds, b.cpuSeconds) as PhaseCost['cpuSeconds'],
  };
};

/** utime + stime of a process in clock ticks (0 once it is gone). */
function ticksOf(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The pid listening on the NATS URL's port on this machine (ss), or none. */
function natsServerPid(natsUrl: string): number | undefined {
  try {
    const port = new URL(natsUrl.split(',')[0]!.trim()).port || '4222';
    const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
    const pid = /pid=(\d+)/.exec(out)?.[1];
    return pid ? Number(pid) : undefined;
  } catch {
    return undefined;
  }
}

export class CostMeter {
  private statements = 0;
  private transactions = 0;
  private readonly natsPid: number | undefined;
  private workerPid = process.pid;

  /** `postgres`: the run's application_name, its schema and its pool size. */
  constructor(
    private readonly ctx: RepositoryContext,
    private readonly jsm: JetStreamManager,
    natsUrl: string,
    private readonly postgres?: { applicationName: string; schema: string; pool: number },
  ) {
    this.natsPid = natsServerPid(natsUrl);
    ctx.knex.on('query', (q: { sql: string }) => {
      if (q.sql.startsWith(OWN)) return;
      if (/^(BEGIN|COMMIT|ROLLBACK)/i.test(q.sql)) {
        if (/^COMMIT/i.test(q.sql)) this.transactions++;
      } else this.statements++;
    });
  }

  /**
   * Runs `phase` (which handles `events` events on `topology`) and returns what it cost; the worker's
   * CPU is `workerPid`'s (this process unless given: a worker process of its own).
   */
  async measure<T>(topology: Topology, events: number, phase: () => Promise<T>, workerPid = process.pid): Promise<{ result: T; cost: PhaseCost }> {
    this.workerPid = workerPid;
    const before = await this.sample(topology, 'before');
    const result = await phase();
    const after = await this.sample(topology, 'after');
    const seconds = (pids: number[]) => pids.reduce((sum, pid) => sum + ((after.ticks.get(pid) ?? 0) - (before.ticks.get(pid) ?? 0)), 0) / TICKS_PER_SECOND;
    const delta = (k: Exclude<keyof Sample, 'ticks' | 'pids'>) => after[k] - before[k];
    return {
      result,
      cost: {
        events,
        cpuSeconds: { process: seconds(after.pids.process), nats: seconds(after.pids.nats), postgres: seconds(after.pids.postgres) },
        statements: delta('statements'),
        transactions: delta('transactions'),
        rowsRead: delta('rowsRead'),
        rowsWritten: delta('rowsWritten'),
        walBytes: delta('walBytes'),
        summaries: delta('summaries'),
        sessionEvents: delta('sessionEvents'),
        outputBytes: delta('outputBytes'),
        eventBytes: delta('eventBytes'),
      },
    };
  }

  /** Bytes per key of the summary bucket (memory storage) as the server accounts them, and its keys. */
  async bucketBytesPerKey(topology: Topology): Promise<{ keys: number; bytesPerKey: number }> {
    const { state } = await this.jsm.streams.info(topology.summaryBucketStream);
    return { keys: state.messages, bytesPerKey: state.messages > 0 ? state.bytes / state.messages : 0 };
  }

  private async sample(topology: Topology, when: 'before' | 'after'): Promise<Sample> {
    // The CPU is read last before the phase and first after it, so the meter's own requests fall
    // outside (but for the one listing the backends after it, a few milliseconds).
    let ticks = when === 'after' ? this.ticks(await this.backends()) : undefined;
    const stats = await this.tableStats();
    const output = await this.jsm.streams.info(topology.outputStream, { subjects_filter: '>' });
    const events = await this.jsm.streams.info(topology.eventsStream);
    const subjects = output.state.subjects ?? {};
    const sample = {
      ...stats,
      summaries: subjects[topology.summarySubject] ?? 0,
      sessionEvents: subjects[topology.sessionPendingSubject] ?? 0,
      outputBytes: output.state.bytes,
      eventBytes: events.state.bytes,
      statements: this.statements,
      transactions: this.transactions,
    };
    const backends = await this.backends();
    ticks ??= this.ticks(backends);
    return { ...sample, ticks, pids: this.pids(backends) };
  }

  private async backends(): Promise<number[]> {
    if (!this.postgres) return [];
    const rows = await rawRows<{ pid: number }>(this.ctx, `${OWN} SELECT pid FROM pg_stat_activity WHERE application_name = ?`, [
      this.postgres.applicationName,
    ]);
    return rows.map((r) => r.pid);
  }

  private async tableStats(): Promise<{ rowsRead: number; rowsWritten: number; walBytes: number }> {
    const pg = this.postgres;
    if (!pg) return { rowsRead: 0, rowsWritten: 0, walBytes: 0 };
    // A backend flushes its table statistics when idle, at most once a second: every pool connection
    // is made to flush now, so the rows counted are the phase's.
    await Promise.all(Array.from({ length: pg.pool }, () => this.ctx.knex.raw(`${OWN} SELECT pg_stat_force_next_flush(), pg_sleep(0.05)`)));
    await sleep(100);
    const [row] = await rawRows<Record<string, string>>(
      this.ctx,
      `${OWN} SELECT (SELECT COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0) FROM pg_stat_user_tables WHERE schemaname = ?) AS read,
         (SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables WHERE schemaname = ?) AS written,
         pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0') AS wal`,
      [pg.schema, pg.schema],
    );
    return { rowsRead: Number(row!.read), rowsWritten: Number(row!.written), walBytes: Number(row!.wal) };
  }

  private pids(backends: number[]) {
    return { process: [this.workerPid], nats: this.natsPid ? [this.natsPid] : [], postgres: backends };
  }

  private ticks(backends: number[]): Map<number, number> {
    const { process: self, nats, postgres } = this.pids(backends);
    return new Map([...self, ...nats, ...postgres].map((pid) => [pid, ticksOf(pid)]));
  }
}
