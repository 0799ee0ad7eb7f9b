/**
 * What `npm run bench:send` prints for one dialect: its table with the verdicts (send, queue at each
 * dispatcher capacity, reorder and remove), and its cells of the summary.
 */
import type { DialectName } from '../src/repository/dialect.js';
import { f2, int, latencyCell, pair, verdict, type DialectResult, type Latency, type Row } from './harness.js';

const TARGET_BARE_P99_FACTOR = 3;
/** queue.reorder and queue.remove p99 at most this many times their bare transaction's p99. */
const TARGET_EDIT_FACTOR = 3;
/** Sends at the maximum prompt size: at most this many of --sends, as each carries a 1 MiB prompt. */
export const MAX_PROMPT_SENDS = 50;

/** The queue path on a worker whose dispatcher delivers `capacity` sessions at once. */
export interface QueueRow {
  capacity: number;
  /** Whether `capacity` is PROMPT_DISPATCH_CONCURRENCY's default. */
  isDefault: boolean;
  /** queue.enqueue until its prompt, one at a time. */
  queue: Latency;
  /** Prompts delivered per second at --concurrency in flight. */
  concurrentOpsPerSec: number;
}

/**
 * Latencies one at a time: the bare transaction and queue steps, the round trip, the lease (PostgreSQL
 * also the advisory lock alone), the repository send, the comments.changed publish alone, the send
 * (endpoint), the queue path at each dispatcher capacity, and the edits of a 100-entry queue with
 * their bare transactions; and the sends and prompts per second at --concurrency in flight.
 */
export type Figures = Record<'bare' | 'bareQueue' | 'rtt' | 'lease' | 'repoSend' | 'publish' | 'endpoint', Latency> & {
  dialect: DialectName;
  advisory?: Latency;
  /** message.send of a prompt of exactly PLAN_COMMENT_LIMITS.promptMaxBytes (5 comments and typed text), one at a time. */
  endpointMaxPrompt: Latency;
  endpointConcurrentOpsPerSec: number;
  queueRows: QueueRow[];
  queueEdits: Record<'reorder' | 'remove' | 'bareReorder' | 'bareRemove', Latency>;
};

const capacityLabel = (q: QueueRow) => `dispatcher capacity ${q.capacity}${q.isDefault ? ' (default)' : ''}`;

export function sendReport(options: { sends: number; concurrency: number }, f: Figures): DialectResult {
  const [n, c, x, e] = [options.sends, options.concurrency, TARGET_BARE_P99_FACTOR, TARGET_EDIT_FACTOR];
  const bound = x * f.bare.p99 + f.rtt.p99;
  const queueBound = x * f.bareQueue.p99 + 2 * f.rtt.p99;
  const { reorder, remove, bareReorder, bareRemove } = f.queueEdits;
  const editRatios = { reorder: reorder.p99 / bareReorder.p99, remove: remove.p99 / bareRemove.p99 };
  const checks = [f.endpoint.p99 <= bound, ...f.queueRows.map((q) => q.queue.p99 <= queueBound), editRatios.reorder <= e, editRatios.remove <= e];
  const [queueChecks, editChecks] = [checks.slice(1, 1 + f.queueRows.length), checks.slice(1 + f.queueRows.length)];
  const perSec = (l: Latency) => `${latencyCell(l)}; ${int(l.opsPerSec)}/s`;
  const queueRows = f.queueRows.flatMap((q, i): Row[] => [
    [`queue.enqueue until its prompt x ${n}, ${capacityLabel(q)}, one at a time, p50 / p99 (ms)`, pair(q.queue), '', `${int(q.queue.opsPerSec)} prompts/s`],
    [
      `queue p99 / (${x} x bare queue p99 + 2 x rtt p99 = ${f2(queueBound)} ms), ${capacityLabel(q)}`,
      f2(q.queue.p99 / queueBound),
      '<= 1',
      verdict(queueChecks[i]!),
    ],
    [`context: queue throughput, ${capacityLabel(q)}, ${c} in flight (prompts delivered/s)`, int(q.concurrentOpsPerSec), '', ''],
  ]);
  const entries = '100 waiting entries';
  const rows: Row[] = [
    [`bare transaction x ${n}, one at a time, p50 / p99 (ms)`, pair(f.bare), '', `${int(f.bare.opsPerSec)} tx/s`],
    [`bare queue steps x ${n} (accept, reserve, transcript, marker, settle), p50 / p99 (ms)`, pair(f.bareQueue), '', `${int(f.bareQueue.opsPerSec)} prompts/s`],
    [`bus round trip x ${n}, p50 / p99 (ms)`, pair(f.rtt), '', 'request to an echo responder'],
    [`lease alone x ${n}, p50 / p99 (ms)`, pair(f.lease), '', f.dialect === 'postgres' ? 'permit + reserved connection + lock + unlock' : 'in-process mutex'],
    ...(f.advisory ? [[`advisory lock + unlock on one reserved connection x ${n}, p50 / p99 (ms)`, pair(f.advisory), '', '3 round trips'] as const] : []),
    [`context: repository send (lease + acceptPrompt) x ${n}, p50 / p99 (ms)`, pair(f.repoSend), '', `${int(f.repoSend.opsPerSec)} sends/s`],
    [`context: comments.changed publish alone x ${n}, p50 / p99 (ms)`, pair(f.publish), '', 'JetStream publish + ack, as a send makes after COMMIT'],
    [`message.send x ${n}, one at a time, p50 / p99 (ms)`, pair(f.endpoint), '', `${int(f.endpoint.opsPerSec)} sends/s`],
    [`send p99 / (${x} x bare p99 + rtt p99 = ${f2(bound)} ms)`, f2(f.endpoint.p99 / bound), '<= 1', verdict(checks[0]!)],
    [`context: message.send throughput, ${c} in flight (sends/s)`, int(f.endpointConcurrentOpsPerSec), '', ''],
    [
      `context: message.send at the maximum prompt size (1 MiB) x ${Math.min(n, MAX_PROMPT_SENDS)}, one at a time, p50 / p99 (ms)`,
      pair(f.endpointMaxPrompt),
      '',
      `${int(f.endpointMaxPrompt.opsPerSec)} sends/s`,
    ],
    ...queueRows,
    [`bare reorder x ${n} (UPDATE ... CASE of 100 positions + revision bump), ${entries}, p50 / p99 (ms)`, pair(bareReorder), '', ''],
    [`queue.reorder x ${n} (the whole order reversed), ${entries}, p50 / p99 (ms)`, pair(reorder), '', 'through the bus and the worker'],
    [`reorder p99 / bare reorder p99`, f2(editRatios.reorder), `<= ${e}`, verdict(editChecks[0]!)],
    [`bare remove x ${n} (DELETE + outcome insert + revision bump), ${entries}, p50 / p99 (ms)`, pair(bareRemove), '', ''],
    [`queue.remove x ${n} (the head), ${entries}, p50 / p99 (ms)`, pair(remove), '', 'through the bus and the worker'],
    [`remove p99 / bare remove p99`, f2(editRatios.remove), `<= ${e}`, verdict(editChecks[1]!)],
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
      ['`task_plan.comments.changed` publish alone', latencyCell(f.publish), ''],
      ['`message.send` with 5 comments through the bus', `${latencyCell(f.endpoint)}; ${int(f.endpointConcurrentOpsPerSec)}/s in flight`, ''],
      [`send p99 ÷ (${x} × bare p99 + rtt p99)`, `${f2(f.endpoint.p99 / bound)} ${verdict(checks[0]!)}`, '≤ 1'],
      ['`message.send` of a 1 MiB prompt (5 comments + typed text) through the bus', latencyCell(f.endpointMaxPrompt), ''],
      ...f.queueRows.flatMap((q, i): Array<[string, string, string]> => [
        [
          `\`queue.enqueue\` with 5 comments until its prompt at the agent, ${capacityLabel(q)}`,
          `${latencyCell(q.queue)}; ${int(q.concurrentOpsPerSec)}/s in flight`,
          '',
        ],
        [`queue p99 ÷ (${x} × bare queue p99 + 2 × rtt p99), ${capacityLabel(q)}`, `${f2(q.queue.p99 / queueBound)} ${verdict(queueChecks[i]!)}`, '≤ 1'],
      ]),
      ['bare reorder of 100 waiting entries (UPDATE … CASE + revision bump)', latencyCell(bareReorder), ''],
      ['`queue.reorder` of 100 waiting entries, reversed', latencyCell(reorder), ''],
      ['reorder p99 ÷ bare reorder p99', `${f2(editRatios.reorder)} ${verdict(editChecks[0]!)}`, `≤ ${e}`],
      ['bare remove of 1 of 100 waiting entries (DELETE + outcome + revision bump)', latencyCell(bareRemove), ''],
      ['`queue.remove` of 1 of 100 waiting entries', latencyCell(remove), ''],
      ['remove p99 ÷ bare remove p99', `${f2(editRatios.remove)} ${verdict(editChecks[1]!)}`, `≤ ${e}`],
    ],
    checks,
  };
}
