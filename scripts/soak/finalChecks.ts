import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Topology } from '../../src/contract/subjects.js';
import { findDrift } from '../../src/projectors/reconcile.js';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import type { RevisionMonitor } from './revisionMonitor.js';
import type { SoakAgents } from './soakAgents.js';
import type { SoakLedger } from './soakLedger.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

/** One final check: what it found wrong (empty: passed), and what the report says about it. */
export interface CheckResult {
  name: string;
  failures: string[];
  figures: string;
}

export interface FinalCheckDeps {
  ctx: RepositoryContext;
  nc: NatsConnection;
  topology: Topology;
  databaseUrl: string;
  ledger: SoakLedger;
  monitor: RevisionMonitor;
  agents: SoakAgents;
}

/** Every message of a stream, as subject, headers and data (a few thousand at most in a soak). */
async function streamMessages(
  nc: NatsConnection,
  stream: string,
): Promise<Array<{ header: (name: string) => string | undefined; data: Record<string, unknown> }>> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream);
  const out = [];
  for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch((err: unknown) => {
      if (/no message found/i.test(String((err as Error)?.message))) return null;
      throw err;
    });
    if (m) out.push({ header: (name: string) => m.header?.get(name) || undefined, data: (m.json() as { data: Record<string, unknown> }).data });
  }
  return out;
}

const count = <K>(map: Map<K, number>, key: K) => map.set(key, (map.get(key) ?? 0) + 1);
const metadataOf = (text: unknown): Record<string, unknown> => (typeof text === 'string' ? JSON.parse(text) : (text as Record<string, unknown>)) ?? {};
const list = (items: string[], max = 10) => (items.length > max ? [...items.slice(0, max), `... and ${items.length - max} more`] : items);

/** Summaries: no revision backwards on the bus; `verify` finds no drift; the last published summary of each task equals a fresh derivation. */
async function checkSummaries(deps: FinalCheckDeps): Promise<CheckResult[]> {
  const { ctx, ledger, monitor } = deps;
  const verify = spawnSync(process.execPath, [CLI, 'verify', '--database-url', deps.databaseUrl], { encoding: 'utf8', timeout: 120_000 });
  const verifyLine = verify.stderr.trim().split('\n').at(-1) ?? '';
  const taskIds = ledger.liveTasks().map((t) => t.taskId);
  const store = createProjectionStore(ctx);
  const drift = await findDrift(store, taskIds);
  const [states, stored] = await Promise.all([store.loadPendingStates(taskIds), store.loadStatusSummaries(taskIds)]);
  const published: string[] = [];
  for (const taskId of taskIds) {
    const state = states.get(taskId);
    const row = stored.get(taskId);
    if (!state) continue;
    const last = monitor.latest(taskId);
    const derivedAction = state.pendingAction ?? '';
    const derivedCount = state.queuedPromptCount ?? 0;
    if (!last) {
      if (row || derivedAction !== '' || derivedCount !== 0)
        published.push(`task ${taskId}: nothing published, derived ${derivedAction || '(none)'} / ${derivedCount} queued`);
      continue;
    }
    const lastAction = last.pending_action ?? '';
    const lastCount = last.queued_prompt_count ?? 0;
    if (lastAction !== derivedAction || lastCount !== derivedCount || last.revision !== row?.revision)
      published.push(
        `task ${taskId}: published revision ${last.revision} (${lastAction || '(none)'}, ${lastCount} queued), stored ${row?.revision ?? 'none'}, derived ${derivedAction || '(none)'}, ${derivedCount} queued`,
      );
  }
  return [
    {
      name: 'no summary revision went backwards on the bus',
      failures: list(monitor.violations),
      figures: `${monitor.counts.published} published, ${monitor.counts.duplicates} duplicates`,
    },
    {
      name: '`verify` reports zero drift',
      failures:
        verify.status === 0 && drift.length === 0
          ? []
          : [
              `verify exited ${verify.status}: ${verifyLine}`,
              ...list(
                drift.map(
                  (d) => `task ${d.taskId}: ${d.kind}, stored ${d.stored} / ${d.storedQueuedPromptCount}, derived ${d.derived} / ${d.derivedQueuedPromptCount}`,
                ),
              ),
            ],
      figures: verifyLine,
    },
    { name: "every task's stored and last published summary equals a fresh derivation", failures: list(published), figures: `${taskIds.length} tasks` },
  ];
}

/** Answers: every answered question reached the agent exactly once (live waiter or resume stream), none twice. */
async function checkAnswers(deps: FinalCheckDeps): Promise<CheckResult> {
  const deliveries = deps.agents.liveDeliveries();
  const live = deliveries.size;
  for (const m of await streamMessages(deps.nc, deps.topology.agentResumeStream)) count(deliveries, m.header('Pending-Projector-Pending-Id') ?? '(none)');
  const rows = await rawRows<{ metadata: unknown }>(deps.ctx, `SELECT metadata FROM task_session_messages WHERE type = 'clarification_request'`);
  const bundles = new Map<string, Set<string>>();
  for (const row of rows) {
    const m = metadataOf(row.metadata);
    const statuses = bundles.get(String(m.pending_id)) ?? new Set();
    statuses.add(m.response_undelivered ? 'undelivered' : String(m.status));
    bundles.set(String(m.pending_id), statuses);
  }
  const failures: string[] = [];
  let answered = 0;
  let restored = 0;
  for (const [pendingId, statuses] of bundles) {
    const n = deliveries.get(pendingId) ?? 0;
    const isAnswered = statuses.size === 1 && statuses.has('answered');
    if (isAnswered) answered++;
    if (n > 1) failures.push(`question ${pendingId}: delivered ${n} times (now ${[...statuses].join(', ')})`);
    else if (isAnswered && n === 0) failures.push(`question ${pendingId}: answered but never delivered`);
    else if (!isAnswered && n === 1 && !statuses.has('rejected')) restored++;
  }
  for (const pendingId of deps.ledger.answersClaimed)
    if (!bundles.has(pendingId) && (deliveries.get(pendingId) ?? 0) > 1) failures.push(`question ${pendingId} (task deleted): delivered more than once`);
  return {
    name: 'every answered question was delivered exactly once',
    failures: list(failures),
    figures: `${bundles.size} questions on the tasks left, ${answered} answered; delivered ${live} live and ${deliveries.size - live} by resume (deleted tasks' included)${restored ? `, ${restored} delivered but pending again` : ''}`,
  };
}

/** Prompts: at most once on the bus and in the stream; exactly once unless labelled `unconfirmed`; removed ones never; none accepted and lost. */
async function checkPrompts(deps: FinalCheckDeps): Promise<{ result: CheckResult; consumers: Map<string, number> }> {
  const { ctx, ledger, agents } = deps;
  const onStream = new Map<string, number>();
  const streamTask = new Map<string, string>();
  for (const m of await streamMessages(deps.nc, deps.topology.agentPromptStream)) {
    const id = m.header('Pending-Projector-Receipt-Id') ?? '(none)';
    count(onStream, id);
    streamTask.set(id, String(m.data.task_id));
  }
  const transcripts = await rawRows<{ id: string; content: string; metadata: unknown }>(
    ctx,
    `SELECT id, content, metadata FROM task_session_messages WHERE metadata LIKE '%"prompt_delivery"%'`,
  );
  const waiting = await rawRows<{ id: string; content: string }>(ctx, `SELECT id, content FROM queued_messages`);
  const outcomes = new Map(
    (await rawRows<{ id: string; status: string }>(ctx, `SELECT id, status FROM pending_projector_prompt_outcomes`)).map((o) => [o.id, o.status]),
  );
  const labels = new Map(transcripts.map((t) => [t.id, String(metadataOf(t.metadata).prompt_delivery)]));
  const failures: string[] = [];
  const deletedTasks = new Set(ledger.tasks.filter((t) => t.deleted).map((t) => t.taskId));
  const figures = { acknowledged: 0, unconfirmed: 0, removedOrCancelled: 0, waiting: waiting.length, unconfirmedOnStream: 0 };
  for (const [id, n] of agents.promptsSeen) if (n > 1) failures.push(`prompt ${id}: published ${n} times`);
  for (const [id, n] of onStream) if (n > 1) failures.push(`prompt ${id}: ${n} times in the prompt stream`);
  for (const [id, label] of labels) {
    const n = Math.max(onStream.get(id) ?? 0, agents.promptsSeen.get(id) ?? 0);
    if (label === 'acknowledged') {
      figures.acknowledged++;
      if ((onStream.get(id) ?? 0) !== 1) failures.push(`prompt ${id}: labelled acknowledged, ${onStream.get(id) ?? 0} in the stream`);
    } else if (label === 'unconfirmed') {
      figures.unconfirmed++;
      if (n > 0) figures.unconfirmedOnStream++;
    } else failures.push(`prompt ${id}: label ${label}`);
  }
  for (const [id, status] of outcomes) {
    figures.removedOrCancelled++;
    if ((onStream.get(id) ?? 0) + (agents.promptsSeen.get(id) ?? 0) > 0) failures.push(`prompt ${id}: ${status}, yet delivered`);
  }
  for (const [id, taskId] of streamTask)
    if (!labels.has(id) && !outcomes.has(id) && !deletedTasks.has(taskId)) failures.push(`prompt ${id}: in the stream with no accepted receipt`);
  for (const [callerId, { taskId, kind }] of ledger.promptsAccepted) {
    if (deletedTasks.has(taskId)) continue;
    if (!labels.has(callerId) && !outcomes.has(callerId) && !waiting.some((w) => w.id === callerId))
      failures.push(`prompt ${callerId} (${kind}, task ${taskId}): accepted, then lost`);
  }
  for (const w of waiting) failures.push(`prompt ${w.id}: still waiting after quiescence`);
  // Which prompts hold which comment: the comment's id is in its body, so in the prompt's text.
  const consumers = new Map<string, number>();
  for (const text of [...transcripts.map((t) => t.content), ...waiting.map((w) => w.content)])
    for (const id of text.match(/c-[0-9a-f-]{36}/g) ?? []) count(consumers, id);
  return {
    result: {
      name: 'every accepted prompt reached the agent at most once (exactly once unless labelled unconfirmed)',
      failures: list(failures),
      figures: `${ledger.promptsAccepted.size} accepted (${[...ledger.promptsAccepted.values()].filter((p) => deletedTasks.has(p.taskId)).length} on tasks deleted since), ${figures.acknowledged} acknowledged, ${figures.unconfirmed} unconfirmed (${figures.unconfirmedOnStream} of them in the stream), ${figures.removedOrCancelled} removed or cancelled`,
    },
    consumers,
  };
}

/** Comments: each one created is still in its collection, deleted by the soak, or in exactly one accepted prompt. */
async function checkComments(deps: FinalCheckDeps, consumers: Map<string, number>): Promise<CheckResult> {
  const { ledger } = deps;
  const present = new Set((await rawRows<{ id: string }>(deps.ctx, `SELECT id FROM task_plan_comments`)).map((r) => r.id));
  const deleted = new Set(ledger.tasks.filter((t) => t.deleted).map((t) => t.taskId));
  const failures: string[] = [];
  const figures = { kept: 0, deleted: 0, consumed: 0 };
  for (const [id, taskId] of ledger.commentsCreated) {
    if (deleted.has(taskId)) continue;
    const n = consumers.get(id) ?? 0;
    const inCollection = present.has(id);
    const byUs = ledger.commentsDeleted.has(id);
    if (inCollection) figures.kept++;
    if (byUs) figures.deleted++;
    if (n === 1) figures.consumed++;
    const where = Number(inCollection) + Number(byUs) + n;
    if (where === 0) failures.push(`comment ${id} (task ${taskId}): lost: not in the collection, not deleted, in no prompt`);
    else if (where > 1) failures.push(`comment ${id} (task ${taskId}): ${inCollection ? 'in the collection, ' : ''}${byUs ? 'deleted, ' : ''}in ${n} prompts`);
  }
  return {
    name: 'no consumed comment was lost',
    failures: list(failures),
    figures: `${ledger.commentsCreated.size} created, ${figures.kept} kept, ${figures.deleted} deleted, ${figures.consumed} consumed`,
  };
}

export async function runFinalChecks(deps: FinalCheckDeps): Promise<CheckResult[]> {
  const summaries = await checkSummaries(deps);
  const answers = await checkAnswers(deps);
  const prompts = await checkPrompts(deps);
  return [...summaries, answers, prompts.result, await checkComments(deps, prompts.consumers)];
}
