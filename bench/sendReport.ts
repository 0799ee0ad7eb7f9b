/**
 * What `npm run bench:send` prints for one dialect: its table with the two verdicts (send and
 * queue), and its cells of the summary.
 */
import type { DialectName } from '../src/repository/dialect.js';
import { f2, int, latencyCell, pair, verdict, type DialectResult, type Latency, type Row } from './harness.js';

const TARGET_BARE_P99_FACTOR = 3;

/**
 * Latencies one at a time: the bare transaction and queue steps, the round trip, the lease (PostgreSQL
 * also the advisory lock alone), the repository send, the comments_updated publish alone, the send
 * (endpoint) and the queue path; and the sends and prompts per second at --concurrency in flight.
 */
export type Figures = Record<'bare' | 'bareQueue' | 'rtt' | 'lease' | 'repoSend' | 'publish' | 'endpoint' | 'queue', Latency> & {
  dialect: DialectName;
  advisory?: Latency;
  endpointConcurrentOpsPerSec: number;
  queueConcurrentOpsPerSec: number;
};

export function sendReport(options: { sends: number; concurrency: number }, f: Figures): DialectResult {
  const [n, c, x] = [options.sends, options.concurrency, TARGET_BARE_P99_FACTOR];
  const bound = x * f.bare.p99 + f.rtt.p99;
  const queueBound = x * f.bareQueue.p99 + 2 * f.rtt.p99;
  const checks = [f.endpoint.p99 <= bound, f.queue.p99 <= queueBound];
  const perSec = (l: Latency) => `${latencyCell(l)}; ${int(l.opsPerSec)}/s`;
  const rows: Row[] = [
    [`bare transaction x ${n}, one at a time, p50 / p99 (ms)`, pair(f.bare), '', `${int(f.bare.opsPerSec)} tx/s`],
    [`bare queue steps x ${n} (accept, reserve, transcript, marker, settle), p50 / p99 (ms)`, pair(f.bareQueue), '', `${int(f.bareQueue.opsPerSec)} prompts/s`],
    [`bus round trip x ${n}, p50 / p99 (ms)`, pair(f.rtt), '', 'request to an echo responder'],
    [`lease alone x ${n}, p50 / p99 (ms)`, pair(f.lease), '', f.dialect === 'postgres' ? 'permit + reserved connection + lock + unlock' : 'in-process mutex'],
    ...(f.advisory ? [[`advisory lock + unlock on one reserved connection x ${n}, p50 / p99 (ms)`, pair(f.advisory), '', '3 round trips'] as const] : []),
    [`context: repository send (lease + acceptPrompt) x ${n}, p50 / p99 (ms)`, pair(f.repoSend), '', `${int(f.repoSend.opsPerSec)} sends/s`],
    [`context: comments_updated publish alone x ${n}, p50 / p99 (ms)`, pair(f.publish), '', 'JetStream publish + ack, as a send makes after COMMIT'],
    [`message.send x ${n}, one at a time, p50 / p99 (ms)`, pair(f.endpoint), '', `${int(f.endpoint.opsPerSec)} sends/s`],
    [`send p99 / (${x} x bare p99 + rtt p99 = ${f2(bound)} ms)`, f2(f.endpoint.p99 / bound), '<= 1', verdict(checks[0]!)],
    [`context: message.send throughput, ${c} in flight (sends/s)`, int(f.endpointConcurrentOpsPerSec), '', ''],
    [`queue.enqueue until its prompt x ${n}, one at a time, p50 / p99 (ms)`, pair(f.queue), '', `${int(f.queue.opsPerSec)} prompts/s`],
    [`queue p99 / (${x} x bare queue p99 + 2 x rtt p99 = ${f2(queueBound)} ms)`, f2(f.queue.p99 / queueBound), '<= 1', verdict(checks[1]!)],
    [`context: queue throughput, ${c} in flight (prompts delivered/s)`, int(f.queueConcurrentOpsPerSec), '', ''],
  ];
  return {
    dialect: f.dialect,
    rows,
    summary: [
      ['bare transaction (the same writes)', perSec(f.bare), ''],
      ['bare queue steps (accept, reserve, transcript, marker, settle)', perSec(f.bareQueue), ''],
      ['bus round trip', latencyCell(f.rtt), ''],
      ['lease alone', latencyCell(f.lease), ''],
      ['advisory lock + unlock, one reserved connection', f.advisory ? latencyCell(f.advisory) : 'n/a', ''],
      ['repository send (lease + acceptPrompt)', perSec(f.repoSend), ''],
      ['`task_plan.comments_updated` publish alone', latencyCell(f.publish), ''],
      ['`message.send` with 5 comments through the bus', `${latencyCell(f.endpoint)}; ${int(f.endpointConcurrentOpsPerSec)}/s in flight`, ''],
      [`send p99 ÷ (${x} × bare p99 + rtt p99)`, `${f2(f.endpoint.p99 / bound)} ${verdict(checks[0]!)}`, '≤ 1'],
      ['`queue.enqueue` with 5 comments until its prompt at the agent', `${latencyCell(f.queue)}; ${int(f.queueConcurrentOpsPerSec)}/s in flight`, ''],
      [`queue p99 ÷ (${x} × bare queue p99 + 2 × rtt p99)`, `${f2(f.queue.p99 / queueBound)} ${verdict(checks[1]!)}`, '≤ 1'],
    ],
    checks,
  };
}
