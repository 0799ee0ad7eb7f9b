import { randomUUID } from 'node:crypto';
import type { SandboxWorkspace } from '../repository/sandbox/seedSandboxWorkspace.js';
import { topologyFor } from '../contract/subjects.js';
import { ENDPOINT_SPECS } from '../contract/endpoints.js';

/**
 * What `pending-projector sandbox` prints once it is ready: where everything is, what was seeded,
 * and copy-paste commands for every endpoint with the seeded ids filled in, each in two forms:
 * `npx pending-projector sandbox request` (needs nothing but this package) and `nats req` (the NATS
 * CLI, for those who have it). Pure, so the text is the same wherever it is printed.
 */

export interface SandboxGuideInput {
  prefix: string;
  workspace: SandboxWorkspace;
  /** The database for people, and the URL another command reaches it with (credentials masked). */
  databaseWhere: string;
  databaseUrl: string;
  /** Whether other processes can reach the database (not an in-memory one). */
  shareable: boolean;
  natsUrl: string;
  healthPort: number;
  /** The sequence of the dead letter the sandbox made, for the dead_letter requests. */
  deadLetterSeq: number;
}

/** One example request: the endpoint, its body, and what it shows. */
export interface SandboxRequest {
  endpoint: string;
  body: Record<string, unknown>;
  what: string;
}

/** A shell word: single-quoted unless it is plainly safe. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** The first change a newcomer makes: answering the seeded question clears its task's pending action. */
export function answerRequest(workspace: SandboxWorkspace): SandboxRequest {
  const { pendingId, questionId, optionIds } = workspace.question;
  return {
    endpoint: 'clarification.respond',
    body: { pending_id: pendingId, answers: [{ question_id: questionId, selected_options: [optionIds[0]], custom_text: '' }] },
    what: 'answer the question: "Add a read cache" loses pending_action=clarification, its revision goes up by one',
  };
}

/** Every other endpoint, in an order in which each still has something to show. */
export function exampleRequests(w: SandboxWorkspace, deadLetterSeq: number): SandboxRequest[] {
  const commentId = randomUUID();
  const attachmentId = randomUUID();
  const queuedId = randomUUID();
  const first = w.queue.queuedIds[0];
  const plan = { task_id: w.plan.taskId, plan_id: w.plan.planId };
  return [
    { endpoint: 'clarification.list_pending', body: { workspace_id: w.workspaceId, limit: 10 }, what: 'the questions still waiting for an answer' },
    { endpoint: 'task.list', body: { workspace_id: w.workspaceId, limit: 20 }, what: "the workspace's tasks with their summaries, a task board's first read" },
    { endpoint: 'summary.get', body: { task_id: w.question.taskId }, what: 'a task summary as stored' },
    { endpoint: 'task.pending_actions', body: { task_id: w.permission.taskId }, what: 'per-session pending actions: a permission request' },
    {
      endpoint: 'session.guard',
      body: { session_id: w.question.sessionId },
      what: 'may a workflow auto-advance this session? (blocked: true while its question is pending)',
    },
    { endpoint: 'session.turns', body: { session_id: w.question.sessionId }, what: 'the turn history: the later lifecycle turn is not the current one' },
    {
      endpoint: 'clarification.detach',
      body: { session_id: w.question.sessionId },
      what: 'the agent disconnected: a pending question stays answerable (delivered as a resume)',
    },
    { endpoint: 'task.reproject', body: { task_id: w.question.taskId }, what: 'project a task now' },
    { endpoint: 'summary.verify', body: { limit: 100 }, what: 'a dry-run verify: which summaries differ from a fresh derivation (none here)' },
    { endpoint: 'consumer.stats', body: {}, what: "the worker's consumer: events not yet delivered, not yet acknowledged, dead letters held" },
    {
      endpoint: 'replica.stats',
      body: {},
      what: 'every replica answers for itself: the events it handled by outcome since it started (the nats form waits 1 s for every reply)',
    },
    { endpoint: 'dead_letter.list', body: { limit: 10 }, what: 'events given up: the sandbox published one that is no envelope' },
    { endpoint: 'dead_letter.show', body: { seq: deadLetterSeq }, what: 'that dead letter with its original event' },
    {
      endpoint: 'dead_letter.retry',
      body: { seq: deadLetterSeq },
      what: 're-inject it and remove the record: still no envelope, so it is dead-lettered again (run it twice: not_found)',
    },
    { endpoint: 'plan_comment.list', body: { task_id: w.plan.taskId }, what: "the plan's pending comments" },
    {
      endpoint: 'plan_comment.create',
      body: { ...plan, comment_id: commentId, body: 'Link each line to its pull request.' },
      what: 'add a comment (idempotent by comment_id: run it twice)',
    },
    {
      endpoint: 'plan_comment.update',
      body: { ...plan, comment_id: commentId, version: 1, body: 'Link each line to its pull request, please.' },
      what: 'edit it at version 1 (a second run is a conflict: it is at version 2 now)',
    },
    { endpoint: 'plan_comment.delete', body: { ...plan, comment_id: commentId, version: 2 }, what: 'delete it at version 2' },
    {
      endpoint: 'plan_comment.import_legacy',
      body: {
        task_id: w.plan.taskId,
        drafts: [{ id: randomUUID(), sessionId: w.plan.sessionId, text: 'A draft kept by an older browser client.', createdAt: '2026-01-01T00:00:00Z' }],
      },
      what: 'import a browser draft once (a second run skips it)',
    },
    {
      endpoint: 'plan_comment.run',
      body: { task_id: w.plan.taskId, caller_id: randomUUID(), plan_comment_refs: w.plan.comments },
      what: 'send the two seeded comments to the IDLE primary session as one prompt (they are consumed)',
    },
    { endpoint: 'plan.delete', body: plan, what: 'delete the plan and the comments left on it' },
    {
      endpoint: 'attachment.stage',
      body: {
        id: attachmentId,
        owner_id: 'sandbox-user',
        workspace_id: w.workspaceId,
        name: 'vitest.log',
        mime_type: 'text/plain',
        size_bytes: 2048,
        storage_key: `uploads-${attachmentId}`,
      },
      what: 'record an uploaded file, for the next prompt to carry',
    },
    {
      endpoint: 'message.send',
      body: {
        session_id: w.permission.sessionId,
        caller_id: randomUUID(),
        content: 'Pin vitest to the current major instead.',
        attachment_ids: [attachmentId],
        attachment_owner_id: 'sandbox-user',
      },
      what: 'a prompt with that file to the session waiting for input (run it twice: replayed: true)',
    },
    { endpoint: 'queue.list', body: { session_id: w.queue.sessionId }, what: "the busy session's queued prompts" },
    {
      endpoint: 'queue.enqueue',
      body: { session_id: w.queue.sessionId, caller_id: queuedId, content: 'And update the changelog.' },
      what: 'queue one more: "Fix the flaky login test" gets queued_prompt_count 3',
    },
    {
      endpoint: 'queue.update',
      body: { session_id: w.queue.sessionId, queue_id: first, version: 1, content: 'When that is done, also check the signup test.' },
      what: 'edit the first queued prompt at version 1 (a second run is queue_changed: it is at version 2)',
    },
    {
      endpoint: 'queue.reorder',
      body: { session_id: w.queue.sessionId, queue_ids: [queuedId, ...[...w.queue.queuedIds].reverse()], revision: w.queue.revision + 1 },
      what: 'put the new one first and swap the others, at the revision queue.list shows (queue_changed once it moved)',
    },
    {
      endpoint: 'queue.remove',
      body: { session_id: w.queue.sessionId, queue_id: first },
      what: 'take the first queued prompt back: queued_prompt_count 2 (run it twice: not_found)',
    },
    { endpoint: 'queue.clear', body: { session_id: w.queue.sessionId }, what: 'take every queued prompt back: queued_prompt_count 0' },
    {
      endpoint: 'queue.set_auto_run',
      body: { session_id: w.queue.sessionId, auto_run: false },
      what: "pause the busy session's queue: what is queued waits even once the agent is idle (auto_run: true resumes)",
    },
    {
      endpoint: 'queue.drain',
      body: { session_id: w.paused.sessionId },
      what: '"Tag the release" is idle with its queue paused: deliver its head now (run it twice: queue_empty)',
    },
    {
      endpoint: 'clarification.expire',
      body: { session_id: w.question.sessionId },
      what: 'a session going terminal expires its pending questions (none once answered)',
    },
  ];
}

/** The endpoints every replica answers: `nats req` waits for every reply (`--replies 0`) until its timeout. */
const EVERY_REPLICA = new Set<string>(ENDPOINT_SPECS.filter((spec) => 'everyReplica' in spec && spec.everyReplica).map((spec) => spec.name));

/** The two ways to send `request` to the sandbox's worker. */
export function requestCommands(prefix: string, request: SandboxRequest): { npx: string; nats: string } {
  const body = shellWord(JSON.stringify(request.body));
  return {
    npx: `npx pending-projector sandbox request ${request.endpoint} ${body} --subject-prefix ${shellWord(prefix)}`,
    nats: `nats req ${shellWord(topologyFor(prefix).serviceSubject(request.endpoint))} ${body}${EVERY_REPLICA.has(request.endpoint) ? ' --replies 0 --timeout 1s' : ''}`,
  };
}

export function sandboxGuide(input: SandboxGuideInput): string {
  const { prefix, workspace: w } = input;
  const topology = topologyFor(prefix);
  const lines: string[] = [];
  const request = (r: SandboxRequest) => {
    const { npx, nats } = requestCommands(prefix, r);
    lines.push(`  # ${r.what}`, `  ${npx}`, `  ${nats}`, '');
  };
  lines.push(
    'pending-projector sandbox',
    `  database: ${input.databaseWhere}`,
    `  NATS:     ${input.natsUrl}, subject prefix ${prefix}`,
    `  health:   http://127.0.0.1:${input.healthPort}/healthz (and /readyz, /metrics)`,
    '',
    `Seeded workspace ${w.workspaceId}:`,
    `  task ${w.question.taskId}  "Add a read cache"          RUNNING, a pending question      -> pending_action clarification`,
    `  task ${w.permission.taskId}  "Upgrade the test runner"   WAITING_FOR_INPUT, a permission  -> pending_action permission`,
    `  task ${w.plan.taskId}  "Write the release notes"   IDLE, a plan with 2 comments`,
    `  task ${w.queue.taskId}  "Fix the flaky login test"  RUNNING, 2 queued prompts         -> queued_prompt_count 2`,
    `  task ${w.paused.taskId}  "Tag the release"           IDLE, its queue paused, 1 prompt -> queued_prompt_count 1`,
    `  task ${w.completed.taskId}  "Rename the config flag"    COMPLETED, nothing pending`,
    '',
    'Run these in another terminal, with the same NATS_URL (and NATS credentials) as this one.',
    '',
    '1. Watch the task summaries change:',
    `  npx pending-projector sandbox watch --subject-prefix ${shellWord(prefix)}`,
    `  nats sub ${shellWord(topology.summarySubject)}`,
    '',
    '2. Answer the question:',
  );
  request(answerRequest(w));
  lines.push('3. Every other endpoint, with the seeded ids (docs/endpoints.md says what each returns):', '');
  for (const r of exampleRequests(w, input.deadLetterSeq)) request(r);
  if (input.shareable) {
    lines.push(
      'Other commands on this database:',
      `  DATABASE_URL=${shellWord(input.databaseUrl)} npx pending-projector verify`,
      `  DATABASE_URL=${shellWord(input.databaseUrl)} npx pending-projector doctor`,
      '',
    );
  }
  lines.push('Ctrl-C stops the worker and removes what the sandbox created: its database, and its streams and KV bucket on NATS.');
  return `${lines.join('\n')}\n`;
}
