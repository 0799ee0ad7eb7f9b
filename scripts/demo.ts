/**
 * `npm run demo`: the incident the current-turn rule was written for, end to end, on a temporary
 * database (SQLite unless DATABASE_URL names a PostgreSQL one) and the local NATS.
 *
 * A real turn opens; 0.8 s later the agent-resume path writes its boot message on a lifecycle turn;
 * the agent then asks a question on the real turn. Before the fix the lifecycle turn (newer
 * started_at) became "current" and the question vanished from every surface. Here the published
 * summaries show it staying visible until it is answered.
 */
import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { topologyFor } from '../src/contract/subjects.js';
import { removeTopology } from '../src/events/removeTopology.js';
import { silentLogger } from '../src/logger.js';
import { claimClarificationBundle, finalizeClarificationDelivery } from '../src/repository/clarifications/clarificationClaims.js';
import { listUnresolvedClarificationBundles } from '../src/repository/clarifications/clarifications.js';
import { createRepositoryContext } from '../src/repository/context.js';
import { createMessage } from '../src/repository/messages.js';
import { getPendingActionsBySessionIds } from '../src/repository/projection/pendingActions.js';
import { createSession, createTask } from '../src/repository/tasks/tasks.js';
import { getCurrentTurn, listVisibleTurns, startTurn } from '../src/repository/turns/turns.js';
import { newestDurableTurnId } from '../src/turns/index.js';
import { connectNats } from '../src/bin/connectNats.js';
import { openSandboxDatabase } from '../src/bin/sandboxDatabase.js';
import { startWorker } from '../src/bin/worker.js';
import { NatsMaxPayloadError } from '../src/events/natsMaxPayload.js';
import { workerConfigFrom } from '../src/bin/workerSettings.js';

// The worker's own defaults and environment (NATS_URL, DATABASE_URL, ...), as `pending-projector
// worker` reads them: a setting renamed or added there reaches the demo too.
const prefix = `demo_${randomUUID().slice(0, 8)}.`;
const config = workerConfigFrom(process.env, { subjectPrefix: prefix, healthPort: 0 });
// DATABASE_URL unset: a temporary SQLite file; PostgreSQL: a schema of its own. Removed at the end.
const database = await openSandboxDatabase(config);
const { db } = database;
const started = Date.now();
const say = (text: string) => process.stdout.write(`[${String(Date.now() - started).padStart(5)} ms] ${text}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const encoder = new TextEncoder();

const nc = await connectNats(config, 'pending-projector-demo').catch(async (err: Error) => {
  process.stderr.write(`demo needs NATS with JetStream at ${config.natsUrl} (set NATS_URL): ${err.message}\n`);
  await database.remove();
  process.exit(2);
});
const topology = topologyFor(prefix);
const publish = (type: string, data: Record<string, unknown>) =>
  nc.publish(`${prefix}${type}`, encoder.encode(JSON.stringify({ id: randomUUID(), type, source: 'demo-backend', timestamp: new Date().toISOString(), data })));

const worker = await startWorker({ db, nc, logger: silentLogger(), config }).catch(async (err: Error) => {
  // A default nats-server (max_payload 1 MB) is the likely one here: the message names the setting.
  process.stderr.write(`demo could not start the worker: ${err.message}\n`);
  await nc.close();
  await database.remove();
  process.exit(err instanceof NatsMaxPayloadError ? 2 : 1);
});
const summaries: Array<{ revision: number; pending_action?: string }> = [];
const sub = nc.subscribe(topology.summarySubject);
void (async () => {
  for await (const m of sub) {
    const s = (m.json() as { data: { status_summary: { revision: number; pending_action?: string } } }).data.status_summary;
    summaries.push(s);
    say(`bus: task.status_summary.updated  revision=${s.revision}  pending_action=${s.pending_action ?? '(none)'}`);
  }
})();
// Generous: on a loaded machine a projection can take seconds, and the demo only reports what happens.
const waitFor = async (predicate: () => boolean, what: string) => {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline && !predicate();) await sleep(25);
  if (!predicate()) throw new Error(`demo: timed out waiting for ${what}`);
};

try {
  const ctx = createRepositoryContext(db);
  const task = await createTask(ctx, { workspaceId: 'demo-workspace', title: 'Architectural question' });
  const session = await createSession(ctx, { taskId: task.id, state: 'RUNNING', isPrimary: true });
  say(`worker up on ${config.natsUrl} (prefix "${prefix}"), ${database.where}`);

  const realTurn = await startTurn(ctx, session.id);
  publish('turn.started', { task_id: task.id, session_id: session.id, turn_id: realTurn.id });
  say(`real turn ${realTurn.id.slice(0, 8)} opens`);
  await sleep(800);

  const boot = await createMessage(ctx, { sessionId: session.id, type: 'script_execution', content: 'agent boot (resume)', completedTurn: true });
  publish('message.added', { task_id: task.id, session_id: session.id, message_id: boot.id, turn_id: boot.turnId, type: 'script_execution' });
  say(`agent resumes: boot message written on lifecycle turn ${boot.turnId.slice(0, 8)} (started 0.8 s later, completed, lifecycle_only: true)`);

  const pendingId = randomUUID();
  const question = await createMessage(ctx, {
    sessionId: session.id,
    turnId: realTurn.id,
    type: 'clarification_request',
    requestsInput: true,
    content: 'Should the cache live in the repository layer or the service layer?',
    metadata: {
      pending_id: pendingId,
      question_id: 'q1',
      question: {
        id: 'q1',
        title: 'Cache placement',
        prompt: 'Repository or service layer?',
        options: [
          { option_id: 'repo', label: 'Repository' },
          { option_id: 'service', label: 'Service' },
        ],
      },
      question_index: 0,
      question_total: 1,
      status: 'pending',
    },
  });
  publish('message.added', {
    task_id: task.id,
    session_id: session.id,
    message_id: question.id,
    turn_id: realTurn.id,
    type: 'clarification_request',
    requests_input: true,
  });
  say('agent asks a clarification on the real turn');
  await waitFor(() => summaries.at(-1)?.pending_action === 'clarification', 'the clarification summary');

  const turns = await listVisibleTurns(ctx, session.id);
  const oldRule = [...turns].sort((a, b) => (a.startedAt < b.startedAt ? 1 : a.startedAt > b.startedAt ? -1 : a.id < b.id ? 1 : -1))[0]!;
  const current = await getCurrentTurn(ctx, session.id);
  const uiCurrent = newestDurableTurnId(
    turns.map((t) => ({ id: t.id, started_at: t.startedAt, created_at: t.createdAt, completed_at: t.completedAt, metadata: t.metadata })),
  );
  say(`old rule (newest started_at) would pick ${oldRule.id.slice(0, 8)} (the lifecycle turn) and hide the question`);
  say(`current-turn authority picks ${current?.id.slice(0, 8)} in SQL and ${uiCurrent?.slice(0, 8)} in the UI resolver: the real turn`);
  say(`pending_action of the session: ${(await getPendingActionsBySessionIds(ctx, [session.id])).get(session.id)}`);
  const listed = await listUnresolvedClarificationBundles(ctx, { workspaceId: 'demo-workspace', limit: 10 });
  say(`list_pending: ${listed.bundles.map((b) => `${b.pendingId.slice(0, 8)} (${b.questions.length} question)`).join(', ')}`);

  const claim = await claimClarificationBundle(ctx, pendingId, {
    status: 'answered',
    answers: new Map([['q1', { question_id: 'q1', selected_options: ['repo'], custom_text: '' }]]),
  });
  if (claim.claimed)
    await finalizeClarificationDelivery(
      ctx,
      claim.rows.map((r) => r.id),
    );
  publish('message.updated', { task_id: task.id, session_id: session.id, message_id: question.id, type: 'clarification_request' });
  say(`the user answers: claimed=${claim.claimed}`);
  await waitFor(() => summaries.length > 0 && summaries.at(-1)?.pending_action === undefined, 'the cleared summary');
  say('question answered: pending_action cleared, revision advanced by one. The question was visible the whole time.');
} finally {
  sub.unsubscribe();
  await worker.stop();
  await removeTopology(await jetstreamManager(nc), topology);
  await nc.drain();
  await database.remove();
  say('demo done: its database and streams are removed');
}
