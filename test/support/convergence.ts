import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { Topology } from '../../src/contract/subjects.js';
import { summaryKey } from '../../src/events/natsTopology.js';
import { pendingActionOf, queuedPromptCountOf } from '../../src/events/statusSummary.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { eventually } from './nats.js';
import { readSummaryStream, type PublishedSummaryEvent } from './summaries.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Until the workers are quiet: nothing pending or unacknowledged on any of `consumers`, and no new
 * message on the output stream for `quietMs`.
 */
export async function waitQuiet(jsm: JetStreamManager, topology: Topology, consumers: readonly string[], timeoutMs = 60_000, quietMs = 3000): Promise<void> {
  let last = { seq: -1, since: Date.now() };
  await eventually(
    async () => {
      const infos = await Promise.all(consumers.map((c) => jsm.consumers.info(topology.eventsStream, c)));
      const seq = (await jsm.streams.info(topology.outputStream)).state.last_seq;
      if (seq !== last.seq) last = { seq, since: Date.now() };
      if (infos.every((i) => i.num_pending === 0 && i.num_ack_pending === 0) && Date.now() - last.since >= quietMs) return true;
      await sleep(250);
      return undefined;
    },
    timeoutMs,
    'the workers to go quiet',
  );
}

/** `pending-projector verify` on the database: its exit code and output. */
export async function runVerify(databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const result = await promisify(execFile)(process.execPath, [CLI, 'verify', '--database-url', databaseUrl], { encoding: 'utf8', timeout: 60_000 }).catch(
    (err: { code?: number; stdout?: string; stderr?: string }) => err,
  );
  return { code: 'code' in result ? (result.code ?? 0) : 0, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
}

export interface ConvergenceFindings {
  /** Tasks whose summary revisions on the output stream did not strictly increase. */
  backwards: string[];
  /** Tasks whose last published summary differs from a fresh derivation (or the stored revision). */
  mismatched: string[];
  /** Tasks whose KV bucket entry is not the stored revision. */
  staleBucket: string[];
  published: Map<string, PublishedSummaryEvent[]>;
}

/**
 * After quiescence: for every task, the revisions published strictly increase, the last published
 * summary equals a fresh derivation at the stored revision, and the bucket holds that revision.
 */
export async function convergenceFindings(
  nc: NatsConnection,
  ctx: RepositoryContext,
  topology: Topology,
  taskIds: readonly string[],
): Promise<ConvergenceFindings> {
  const published = await readSummaryStream(nc, topology.prefix);
  const [derived, stored] = await Promise.all([createProjectionStore(ctx).loadPendingStates(taskIds), loadStatusSummaries(ctx, taskIds)]);
  const findings: ConvergenceFindings = { backwards: [], mismatched: [], staleBucket: [], published };
  const bucket = await new Kvm(nc).open(topology.summaryBucket);
  for (const taskId of taskIds) {
    const events = published.get(taskId) ?? [];
    const revisions = events.map((e) => e.status_summary.revision);
    if (revisions.some((r, i) => i > 0 && r <= revisions[i - 1]!)) findings.backwards.push(`${taskId}: ${revisions.join(',')}`);
    const latest = events.at(-1);
    const want = derived.get(taskId)!;
    const got = latest && {
      pendingAction: pendingActionOf(latest.status_summary),
      queuedPromptCount: queuedPromptCountOf(latest.status_summary),
      workspaceId: latest.workspace_id,
      revision: latest.status_summary.revision,
    };
    const expected = {
      pendingAction: want.pendingAction,
      queuedPromptCount: want.queuedPromptCount ?? 0,
      workspaceId: want.workspaceId,
      revision: stored.get(taskId)?.revision,
    };
    if (JSON.stringify(got) !== JSON.stringify(expected))
      findings.mismatched.push(`${taskId}: published ${JSON.stringify(got)}, derived ${JSON.stringify(expected)}`);
    // Late joiners read the bucket: it must hold the same last revision.
    const entry = await bucket.get(summaryKey(taskId));
    const inBucket = entry?.json<{ data: { status_summary: { revision: number } } }>().data.status_summary.revision;
    if (inBucket !== expected.revision) findings.staleBucket.push(`${taskId}: bucket ${inBucket}, stored ${expected.revision}`);
  }
  return findings;
}
