/**
 * What `npm run bench:send` prints: the figures of one dialect, its table with the two verdicts
 * (send and queue), and the Markdown summary of every dialect with the targets met.
 */
import type { DialectName } from '../src/repository/dialect.js';
import type { Timed } from './sendParts.js';
import { DIALECT_TITLE, f2, int, markdownTable, textTable, verdict, type Row } from './table.js';

export const TARGET_BARE_P99_FACTOR = 3;

function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

export interface Latency {
  p50: number;
  p99: number;
  opsPerSec: number;
}

export const latencyOf = (t: Timed): Latency => ({ p50: percentile(t.samples, 50), p99: percentile(t.samples, 99), opsPerSec: t.opsPerSec });

export interface Figures {
  dialect: DialectName;
  bare: Latency;
  bareQueue: Latency;
  rtt: Latency;
  lease: Latency;
  /** PostgreSQL only. */
  advisory?: Latency;
  repoSend: Latency;
  /** The task_plan.comments_updated publish a send makes after COMMIT, alone. */
  publish: Latency;
  endpoint: Latency;
  /** Sends per second with --concurrency in flight. */
  endpointConcurrentOpsPerSec: number;
  /** queue.enqueue until its prompt reached the agent. */
  queue: Latency;
  /** Prompts delivered per second with --concurrency enqueues in flight. */
  queueConcurrentOpsPerSec: number;
}

const boundOf = (f: Figures) => TARGET_BARE_P99_FACTOR * f.bare.p99 + f.rtt.p99;
const queueBoundOf = (f: Figures) => TARGET_BARE_P99_FACTOR * f.bareQueue.p99 + 2 * f.rtt.p99;
const pair = (l: Latency) => `${f2(l.p50)} / ${f2(l.p99)}`;

export function formatReport(f: Figures, options: { sends: number; concurrency: number }): string[] {
  const n = options.sends;
  const bound = boundOf(f);
  const queueBound = queueBoundOf(f);
  const rows: Row[] = [
    [`bare transaction x ${n}, one at a time, p50 / p99 (ms)`, pair(f.bare), '', `${int(f.bare.opsPerSec)} tx/s`],
    [`bare queue steps x ${n} (accept, reserve, transcript, marker, settle), p50 / p99 (ms)`, pair(f.bareQueue), '', `${int(f.bareQueue.opsPerSec)} prompts/s`],
    [`bus round trip x ${n}, p50 / p99 (ms)`, pair(f.rtt), '', 'request to an echo responder'],
    [`lease alone x ${n}, p50 / p99 (ms)`, pair(f.lease), '', f.dialect === 'postgres' ? 'permit + reserved connection + lock + unlock' : 'in-process mutex'],
    ...(f.advisory ? [[`advisory lock + unlock on one reserved connection x ${n}, p50 / p99 (ms)`, pair(f.advisory), '', '3 round trips'] as Row] : []),
    [`context: repository send (lease + acceptPrompt) x ${n}, p50 / p99 (ms)`, pair(f.repoSend), '', `${int(f.repoSend.opsPerSec)} sends/s`],
    [`context: comments_updated publish alone x ${n}, p50 / p99 (ms)`, pair(f.publish), '', 'JetStream publish + ack, as a send makes after COMMIT'],
    [`message.send x ${n}, one at a time, p50 / p99 (ms)`, pair(f.endpoint), '', `${int(f.endpoint.opsPerSec)} sends/s`],
    [`send p99 / (${TARGET_BARE_P99_FACTOR} x bare p99 + rtt p99 = ${f2(bound)} ms)`, f2(f.endpoint.p99 / bound), '<= 1', verdict(f.endpoint.p99 <= bound)],
    [`context: message.send throughput, ${options.concurrency} in flight (sends/s)`, int(f.endpointConcurrentOpsPerSec), '', ''],
    [`queue.enqueue until its prompt x ${n}, one at a time, p50 / p99 (ms)`, pair(f.queue), '', `${int(f.queue.opsPerSec)} prompts/s`],
    [`queue p99 / (${TARGET_BARE_P99_FACTOR} x bare queue p99 + 2 x rtt p99 = ${f2(queueBound)} ms)`, f2(f.queue.p99 / queueBound), '<= 1', verdict(f.queue.p99 <= queueBound)],
    [`context: queue throughput, ${options.concurrency} in flight (prompts delivered/s)`, int(f.queueConcurrentOpsPerSec), '', ''],
  ];
  return ['', `== ${DIALECT_TITLE[f.dialect]} ==`, ...textTable(rows)];
}

export function formatSummary(all: readonly Figures[]): string[] {
  const cells = (fn: (f: Figures) => string) => all.map(fn);
  const lat = (l: Latency) => `p50 ${f2(l.p50)}, p99 ${f2(l.p99)} ms`;
  const ratio = (measured: (f: Figures) => number, bound: (f: Figures) => number) =>
    cells((f) => `${f2(measured(f) / bound(f))} ${verdict(measured(f) <= bound(f))}`);
  const sendMet = (f: Figures) => f.endpoint.p99 <= boundOf(f);
  const queueMet = (f: Figures) => f.queue.p99 <= queueBoundOf(f);
  const lines = [
    ['bare transaction (the same writes)', ...cells((f) => `${lat(f.bare)}; ${int(f.bare.opsPerSec)}/s`), ''],
    ['bare queue steps (accept, reserve, transcript, marker, settle)', ...cells((f) => `${lat(f.bareQueue)}; ${int(f.bareQueue.opsPerSec)}/s`), ''],
    ['bus round trip', ...cells((f) => lat(f.rtt)), ''],
    ['lease alone', ...cells((f) => lat(f.lease)), ''],
    ['advisory lock + unlock, one reserved connection', ...cells((f) => (f.advisory ? lat(f.advisory) : 'n/a')), ''],
    ['repository send (lease + acceptPrompt)', ...cells((f) => `${lat(f.repoSend)}; ${int(f.repoSend.opsPerSec)}/s`), ''],
    ['`task_plan.comments_updated` publish alone', ...cells((f) => lat(f.publish)), ''],
    ['`message.send` with 5 comments through the bus', ...cells((f) => `${lat(f.endpoint)}; ${int(f.endpointConcurrentOpsPerSec)}/s in flight`), ''],
    [`send p99 ÷ (${TARGET_BARE_P99_FACTOR} × bare p99 + rtt p99)`, ...ratio((f) => f.endpoint.p99, boundOf), '≤ 1'],
    ['`queue.enqueue` with 5 comments until its prompt at the agent', ...cells((f) => `${lat(f.queue)}; ${int(f.queueConcurrentOpsPerSec)}/s in flight`), ''],
    [`queue p99 ÷ (${TARGET_BARE_P99_FACTOR} × bare queue p99 + 2 × rtt p99)`, ...ratio((f) => f.queue.p99, queueBoundOf), '≤ 1'],
  ];
  const met = all.map((f) => `${DIALECT_TITLE[f.dialect]} ${Number(sendMet(f)) + Number(queueMet(f))} of 2`);
  return ['summary:', ...markdownTable(['npm run bench:send', ...all.map((f) => DIALECT_TITLE[f.dialect]), 'target'], lines), `targets met: ${met.join(', ')}`];
}
