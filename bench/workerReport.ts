/** What `npm run bench` prints for one dialect: its table, its cells of the summary and its verdicts. */
import type { DialectName } from '../src/repository/dialect.js';
import { f1, f2, int, percentile, secs, verdict, type DialectResult, type Row } from './harness.js';
import { TARGET_P99_OVER_TRICKLE, type LevelResult } from './latencyLevels.js';
import { OUTAGE_DRIFT_EVERY, type BootFigures } from './workerBoot.js';
import { mb, perSecond, type MemoryResult, type Rate } from './workerPhases.js';
import type { PhaseCost } from './costMeter.js';

const TARGET_DISTINCT_OVER_LIMIT = 0.7;
const TARGET_DISTINCT_OVER_FLOOR = 0.5;
const TARGET_BURSTS_OVER_LIMIT = 5;
const TARGET_RECONCILE_OVER_READS = 0.5;
const TARGET_MEMORY_MB = 50;

export interface DialectReport {
  dialect: DialectName;
  where: string;
  seed: { tasks: number; drift: number; ms: number };
  concurrency: number;
  pageSize: number;
  limit: Rate;
  limitRounds: number[];
  /** (1) without the record of summary writes (ADR 0018), on the same tasks, beside each round of (1). */
  unrecorded: Rate;
  unrecordedRounds: number[];
  distinct: Rate;
  distinctRounds: number[];
  /** (2)'s floor: the same work with nothing but the drivers and the bus (workerFloor.ts). */
  floor: Rate;
  floorRounds: number[];
  /** What (2) and its floor cost, over all their rounds, the summary bucket after (2), and (6)'s whole stream (warm-up included), the worker in its own process. */
  costs: { distinct: PhaseCost; floor: PhaseCost; streaming: PhaseCost; bucket: { keys: number; bytesPerKey: number } };
  bursts: { rate: Rate; projections: number; tasks: number; length: number };
  /** (4) bare round trips, ms. */
  bare: number[];
  /** (4) the levels in the order they ran. */
  latency: LevelResult[];
  latencySeconds: number;
  boot: BootFigures;
  memory: MemoryResult;
  ms: number;
}

const trickleOf = (r: DialectReport) => r.latency.find((l) => l.role === 'trickle')!;

/** (4)'s threshold: TARGET_P99_OVER_TRICKLE × the trickle's p99, ms. */
export const latencyThresholdMs = (r: DialectReport) => TARGET_P99_OVER_TRICKLE * trickleOf(r).p99;

const levelRate = (l: LevelResult) => `${int(l.offeredRate)}/s (${int(l.achievedRate)}/s achieved)`;

const perThousand = (c: PhaseCost) => [c.cpuSeconds.process, c.cpuSeconds.nats, c.cpuSeconds.postgres].map((s) => f2((s * 1000) / c.events)).join(' / ');
const perEvent = (c: PhaseCost, n: number) => f2(n / c.events);

/** The cost rows of (2) and its floor: CPU per 1,000 events, then per event the statements, rows and bus messages. */
function costRows(r: DialectReport): Row[] {
  const { distinct: d, floor: fl, bucket } = r.costs;
  const pg = r.dialect === 'postgres';
  const rows: Row[] = [
    [
      '(2) cost: CPU s per 1,000 events: bench process (worker) / nats-server / PostgreSQL backends',
      perThousand(d),
      '',
      `floor: ${perThousand(fl)}${pg ? '' : ' (SQLite runs in the bench process)'}`,
    ],
    [
      '(2) cost per event: statements / transactions',
      `${perEvent(d, d.statements)} / ${perEvent(d, d.transactions)}`,
      '',
      `floor: ${perEvent(fl, fl.statements)} / ${perEvent(fl, fl.transactions)}; counted as knex issues them, BEGIN and COMMIT apart`,
    ],
  ];
  if (pg) {
    rows.push([
      '(2) cost per event: rows read / rows written in the schema; WAL bytes',
      `${perEvent(d, d.rowsRead)} / ${perEvent(d, d.rowsWritten)}; ${int(d.walBytes / d.events)}`,
      '',
      `floor: ${perEvent(fl, fl.rowsRead)} / ${perEvent(fl, fl.rowsWritten)}; ${int(fl.walBytes / fl.events)}; rows: pg_stat_user_tables; WAL: the whole cluster's`,
    ]);
  }
  rows.push(
    [
      '(2) cost per event: summaries + KV puts / session events published; output bytes; event bytes',
      `${perEvent(d, d.summaries)} / ${perEvent(d, d.sessionEvents)}; ${int(d.outputBytes / d.events)}; ${int(d.eventBytes / d.events)}`,
      '',
      `floor: ${perEvent(fl, fl.summaries)} / ${perEvent(fl, fl.sessionEvents)}; ${int(fl.outputBytes / fl.events)}; ${int(fl.eventBytes / fl.events)} (stream state deltas)`,
    ],
    ['context: summary bucket (memory storage): bytes per key', int(bucket.bytesPerKey), '', `${int(bucket.keys)} keys, as the server accounts them`],
    [
      `(6) cost: CPU s per 1,000 events of its ${int(r.costs.streaming.events)}: worker process / nats-server / PostgreSQL backends`,
      perThousand(r.costs.streaming),
      '',
      `95% streaming message.updated (acked unread); ${int(r.costs.streaming.eventBytes / r.costs.streaming.events)} event bytes per event`,
    ],
  );
  return rows;
}

export function workerReport(r: DialectReport, fullLatencySeconds: number): DialectResult {
  const targets = r.latency.filter((l) => l.role === 'target');
  const [limit, distinct, bursts, reads, floor] = [r.limit, r.distinct, r.bursts.rate, r.boot.reads, r.floor].map(perSecond) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const reconcile = (r.boot.reconcile.progress.visited * 1000) / r.boot.reconcile.ms;
  const rssDeltaMb = mb(r.memory.after.rss - r.memory.warm.rss);
  const checks = {
    distinct: distinct / limit >= TARGET_DISTINCT_OVER_LIMIT,
    floor: distinct / floor >= TARGET_DISTINCT_OVER_FLOOR,
    bursts: bursts / limit >= TARGET_BURSTS_OVER_LIMIT,
    latency: targets.every((l) => l.p99 <= latencyThresholdMs(r)),
    reconcile: reconcile / reads >= TARGET_RECONCILE_OVER_READS,
    memory: rssDeltaMb <= TARGET_MEMORY_MB,
  };
  const f = { limit, distinct, bursts, reconcile, reads, floor, rssDeltaMb, targets, checks };
  const { boot, memory: m } = r;
  const trickle = trickleOf(r);
  const threshold = latencyThresholdMs(r);
  const short = r.latencySeconds < fullLatencySeconds;
  const perSec = (run: { progress: { visited: number }; ms: number }) => (run.progress.visited * 1000) / run.ms;
  const coldRepairs = (boot.cold.progress.repaired * 1000) / boot.cold.ms;
  const rows: Row[] = [
    [
      `(1) limit: projectTask x ${int(r.limit.count)}, ${r.concurrency} concurrent (projections/s)`,
      int(f.limit),
      '',
      `rounds ${r.limitRounds.map(int).join(', ')}`,
    ],
    [
      '(1) context: the same without the record of summary writes (projections/s)',
      int(perSecond(r.unrecorded)),
      '',
      `(1) = ${f2(f.limit / perSecond(r.unrecorded))} x this  (rounds ${r.unrecordedRounds.map(int).join(', ')})`,
    ],
    [
      `(2) worker, ${int(r.distinct.count)} distinct changed tasks (events/s)`,
      int(f.distinct),
      `>= ${TARGET_DISTINCT_OVER_LIMIT} x (1)`,
      `${f2(f.distinct / f.limit)} x (1) ${verdict(f.checks.distinct)}  (rounds ${r.distinctRounds.map(int).join(', ')})`,
    ],
    [`(2) floor: the same work, drivers and bus only, ${int(r.floor.count)} tasks (events/s)`, int(f.floor), '', `rounds ${r.floorRounds.map(int).join(', ')}`],
    [`(2) / its floor`, f2(f.distinct / f.floor), `>= ${TARGET_DISTINCT_OVER_FLOOR}`, verdict(f.checks.floor)],
    ...costRows(r),
    [
      `(3) worker, bursts of ${r.bursts.length} x ${r.bursts.tasks} tasks (events/s)`,
      int(f.bursts),
      `>= ${TARGET_BURSTS_OVER_LIMIT} x (1)`,
      `${f2(f.bursts / f.limit)} x (1) ${verdict(f.checks.bursts)}  (${int(r.bursts.projections)} projections for ${int(r.bursts.rate.count)} events)`,
    ],
    ...r.latency.map((l): Row => {
      const what = `(4) ${l.role === 'context' ? 'context: ' : ''}${l.label}${l.role === 'trickle' ? ' (trickle)' : ''}, ${int(l.events)} events at ${levelRate(l)}: p50 / p99 (ms)`;
      const value = `${f2(l.p50)} / ${f2(l.p99)}`;
      if (l.role === 'trickle') return [what, value, '', ''];
      const ratio = `${f2(l.p99 / trickle.p99)} x trickle p99`;
      if (l.role === 'context') return [what, value, '', ratio];
      return [what, value, `p99 <= ${TARGET_P99_OVER_TRICKLE} x trickle p99 = ${f2(threshold)}`, `${ratio} ${verdict(l.p99 <= threshold)}${short ? '*' : ''}`];
    }),
    [
      `(4) context: bare round trip x ${int(r.bare.length)}, p50 / p99 (ms)`,
      `${f2(percentile(r.bare, 50))} / ${f2(percentile(r.bare, 99))}`,
      '',
      'projectTask incl. publish until a client has the summary, one at a time',
    ],
    [
      `(5a) boot after an outage: ${int(boot.reconcile.progress.visited)} tasks, ${int(boot.reconcile.progress.drifted)} to repair (tasks/s)`,
      int(f.reconcile),
      '',
      `${int(boot.reconcile.progress.repaired)} repaired in ${secs(boot.reconcile.ms)}; pages of ${r.pageSize}`,
    ],
    [`(5b) bare keyset reads of the same pages (tasks/s)`, int(f.reads), '', `the reads reconcile issues, nothing written; ${secs(boot.reads.ms)}`],
    [`(5) boot after an outage / bare keyset reads`, f2(f.reconcile / f.reads), `>= ${TARGET_RECONCILE_OVER_READS}`, verdict(f.checks.reconcile)],
    [
      `(5c) context: first start, ${int(boot.cold.progress.drifted)} of ${int(boot.cold.progress.visited)} to repair (tasks/s)`,
      int(perSec(boot.cold)),
      '',
      `${f2(perSec(boot.cold) / f.reads)} x (5b); ${int(coldRepairs)} repairs/s = ${f2(coldRepairs / perSecond(boot.ceiling))} x (5e); ${secs(boot.cold.ms)}`,
    ],
    [`(5d) context: a walk with nothing to repair (tasks/s)`, int(perSec(boot.recheck)), '', `${f2(perSec(boot.recheck) / f.reads)} x (5b)`],
    [
      `(5e) context: the bus alone, summary publish + KV put (pairs/s)`,
      int(perSecond(boot.ceiling)),
      '',
      `${int(boot.ceiling.count)} pairs, ${r.pageSize} in flight, no database`,
    ],
    [
      `(5f) context: refill of an emptied summary bucket (keys/s)`,
      int((boot.refill.progress.visited * 1000) / boot.refill.ms),
      '',
      `${int(boot.refill.progress.filled)} keys in ${secs(boot.refill.ms)}, pages of ${r.pageSize}`,
    ],
    [
      `(6) worker RSS after ${int(m.events)} events - after ${int(m.warmupEvents)} (MB)`,
      f1(f.rssDeltaMb),
      `<= ${TARGET_MEMORY_MB} MB`,
      `${verdict(f.checks.memory)}  (RSS ${f1(mb(m.warm.rss))} -> ${f1(mb(m.after.rss))}, peak ${f1(mb(m.peakRss))}; heap used ${f1(mb(m.warm.heapUsed))} -> ${f1(mb(m.after.heapUsed))})`,
    ],
    [
      `(6) context: RSS growth over the last ${int(m.events - m.midEvents)} events (MB)`,
      f1(mb(m.after.rss - m.mid.rss)),
      '',
      `${int((m.events * 1000) / m.wallMs)} events/s, ${int(m.relevantEvents)} pending-sensitive`,
    ],
  ];
  const ratio = (value: number, of: number, ok: boolean) => `${int(value)}/s = ${f2(value / of)}× ${verdict(ok)}`;
  const levelP99 = (label: string) => r.latency.find((l) => l.label === label)?.p99 ?? Number.NaN;
  const targetP99s = [trickle.p99, ...f.targets.map((l) => l.p99)].map(f1).join(' / ');
  return {
    dialect: r.dialect,
    heading: r.where,
    intro: [
      `   ${int(r.seed.tasks)} tasks seeded (${int(r.seed.drift)} needing repair, ${100 / OUTAGE_DRIFT_EVERY}% changed by the outage of (5)); dialect run ${secs(r.ms)}`,
    ],
    rows,
    after: [
      `  (4) latency: publish -> summary, ${r.latencySeconds} s of publishing per level, the worker in its own process; achieved = summaries received per second.`,
      ...(short ? [`  *   indicative only: a verdict on (4) needs ${fullLatencySeconds} s or more per level.`] : []),
    ],
    summary: [
      ['(1) bare projections, 16 concurrent', `${int(f.limit)}/s`, ''],
      ['(2) worker, one event per distinct changed task', ratio(f.distinct, f.limit, f.checks.distinct), `≥ ${TARGET_DISTINCT_OVER_LIMIT}× (1)`],
      ['(2) ÷ its floor: the same work, drivers and bus only', ratio(f.distinct, f.floor, f.checks.floor), `≥ ${TARGET_DISTINCT_OVER_FLOOR}× the floor`],
      ['(2) CPU s per 1,000 events: worker / nats-server / PostgreSQL (floor)', `${perThousand(r.costs.distinct)} (${perThousand(r.costs.floor)})`, ''],
      [`(3) worker, bursts of ${r.bursts.length} events per task`, ratio(f.bursts, f.limit, f.checks.bursts), `≥ ${TARGET_BURSTS_OVER_LIMIT}× (1)`],
      [
        `(4) p99 publish → summary at 5% / 25% / 50% of (1)${short ? ' (indicative: short levels)' : ''}`,
        `${targetP99s} ms = ${f.targets.map((l) => `${f2(l.p99 / trickle.p99)}×`).join(' / ')} ${verdict(f.checks.latency)}`,
        `p99 at 25% and 50% ≤ ${TARGET_P99_OVER_TRICKLE}× p99 at 5%`,
      ],
      [
        '(4) context: p99 at 75% of (1) / 50% of (2); bare round trip p99',
        `${f1(levelP99('75% of (1)'))} / ${f1(levelP99('50% of (2)'))} ms; ${f1(percentile(r.bare, 99))} ms`,
        '',
      ],
      [
        `(5) boot after an outage (${100 / OUTAGE_DRIFT_EVERY}% to repair) ÷ bare keyset reads`,
        ratio(f.reconcile, f.reads, f.checks.reconcile),
        `≥ ${TARGET_RECONCILE_OVER_READS}×`,
      ],
      [`(6) worker RSS after ${int(m.events)} events − after warm-up`, `${f1(f.rssDeltaMb)} MB ${verdict(f.checks.memory)}`, `≤ ${TARGET_MEMORY_MB} MB`],
    ],
    checks: Object.values(f.checks),
  };
}
