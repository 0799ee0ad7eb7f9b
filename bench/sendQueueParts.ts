/**
 * The queue path of `npm run bench:send`: `queue.enqueue` until the dispatcher's prompt reaches
 * the agent, against the bare transactions of the same steps.
 *
 * - The bare queue steps: one prompt through the five transactions the path commits, with no bus
 *   and no dispatcher (the bench holds the reservation itself, so nothing may race it for the head).
 * - The agent: a core subscription on `<prefix>agent.*.prompt`, which sees every JetStream publish
 *   to the prompt stream. It keeps every prompt it got by receipt id, so a prompt delivered twice,
 *   one it cannot read, or one nobody asked for makes the run a wrong answer.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { PendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import type { Envelope } from '../src/contract/envelope.js';
import { CALLER_ID_HEADER, RECEIPT_ID_HEADER, SESSION_PROMPT, promptMsgId } from '../src/events/prompts/natsPromptDelivery.js';
import type { Topology } from '../src/contract/subjects.js';
import type { TaskAdmission } from '../src/repository/admission/taskAdmission.js';
import type { RepositoryContext } from '../src/repository/context.js';
import type { PlanCommentSchema } from '../src/repository/planComments/planCommentStore.js';
import { createPromptStore } from '../src/repository/prompts/promptStore.js';
import type { PromptReceiptStore } from '../src/repository/prompts/promptReceiptStore.js';
import { WrongAnswerError, expectFields } from './harness.js';
import type { SeededCommentedTask } from './seed/fixtures.js';

/**
 * The worker's QUEUE_MAX_PER_SESSION and RESERVATION_TTL_MS in this bench; the bare steps use the
 * same. The queue limit is the queue-edit row's 100 waiting entries (sendQueueEdits.ts); a higher
 * limit costs nothing: acceptance compares one count either way.
 */
export const QUEUE_MAX_PER_SESSION = 100;
export const RESERVATION_TTL_MS = 30_000;
/** How long a prompt may take to reach the agent before the run stops as a wrong answer. */
const PROMPT_TIMEOUT_MS = 60_000;
const BARE_OWNER = 'bench:bare-queue-steps';

export interface BareQueueDeps {
  ctx: RepositoryContext;
  schema: PlanCommentSchema;
  admission: TaskAdmission;
  receipts: PromptReceiptStore;
}

/**
 * One prompt through the queue path's transactions, no bus: the enqueue's accepting transaction
 * (as queue.enqueue runs it with comment refs: one admission mutation around acceptPrompt,
 * deliveryKind 'queued'), then reserveHead, persistTranscript, markAttempted and settle
 * (acknowledged). Not the dispatcher's reads around them (head eligibility, eligibility under the
 * reservation, the waiting counts of its events), nor any event.
 *
 * Nothing else may deliver this session's receipt meanwhile: call it while no worker runs on the
 * database, or a dispatcher's poll can reserve the head between the accept and reserveHead.
 */
export async function bareQueueSteps(deps: BareQueueDeps, task: SeededCommentedTask, content: string): Promise<void> {
  const callerId = randomUUID();
  const wrong = (step: string, got: unknown) => new WrongAnswerError(`bare queue steps on task ${task.taskId}, ${step}: ${JSON.stringify(got)}`);
  const outcome = await deps.admission.withMutation(deps.ctx, task.taskId, (tx) =>
    createPromptStore(tx, deps.schema).acceptPrompt({
      callerId,
      target: { kind: 'session', sessionId: task.sessionId, taskId: task.taskId },
      deliveryKind: 'queued',
      queueMaxPerSession: QUEUE_MAX_PER_SESSION,
      content,
      planCommentRefs: task.refs,
    }),
  );
  if (!outcome.ok) throw wrong('admission', outcome);
  const accepted = outcome.value;
  if (!accepted.ok || accepted.replayed || accepted.queueId !== callerId || accepted.consumedCommentIds.length !== task.refs.length)
    throw wrong('accept', accepted);
  const reservation = await deps.receipts.reserveHead(task.sessionId, BARE_OWNER, RESERVATION_TTL_MS);
  if (reservation?.receipt.id !== callerId) throw wrong('reserveHead', reservation);
  const { token } = reservation;
  const transcript = await deps.receipts.persistTranscript(callerId, token);
  if (!transcript.ok || !transcript.written || transcript.message.id !== callerId || transcript.message.content !== accepted.content)
    throw wrong('persistTranscript', transcript);
  const mark = await deps.receipts.markAttempted(callerId, token, { retryAfterMs: 1_000 });
  if (!mark.ok) throw wrong('markAttempted', mark);
  const settled = await deps.receipts.settle(callerId, token, 'acknowledged', callerId);
  if (!settled.ok || settled.message?.metadata.prompt_delivery !== 'acknowledged') throw wrong('settle', settled);
}

/** A prompt as the agent got it. */
export interface ArrivedPrompt {
  /** `performance.now()` in the subscription's callback. */
  at: number;
  subject: string;
  receiptId: string;
  callerId: string | undefined;
  envelope: Envelope;
}

/** What a delivered prompt must say. */
export interface ExpectedPrompt {
  receiptId: string;
  task: SeededCommentedTask;
  deliveryKind: 'direct' | 'queued';
  content: string;
}

export interface PromptAgent {
  /** `expected`'s prompt, checked, once it arrived (perhaps already); a WrongAnswerError after PROMPT_TIMEOUT_MS without it. */
  arrival(expected: ExpectedPrompt): Promise<ArrivedPrompt>;
  /** Stops listening; throws a WrongAnswerError for a prompt that arrived twice, could not be read, or was never asked for. */
  stop(): void;
}

/** Subscribes the agent on the topology's prompt subjects (every session). */
export function startPromptAgent(nc: NatsConnection, topology: Topology): PromptAgent {
  const arrived = new Map<string, ArrivedPrompt>();
  const waiters = new Map<string, (prompt: ArrivedPrompt) => void>();
  const asked = new Set<string>();
  const problems: string[] = [];
  const subscription: Subscription = nc.subscribe(topology.agentPromptSubjects[0]!, {
    callback: (err, m) => {
      const at = performance.now();
      if (err) return void problems.push(`the prompt subscription failed: ${err.message}`);
      const receiptId = m.headers?.get(RECEIPT_ID_HEADER) ?? '';
      let envelope: Envelope;
      try {
        envelope = m.json<Envelope>();
      } catch (e) {
        return void problems.push(`unreadable prompt on ${m.subject}: ${(e as Error).message}`);
      }
      if (receiptId === '') return void problems.push(`a prompt on ${m.subject} without ${RECEIPT_ID_HEADER}`);
      if (arrived.has(receiptId)) return void problems.push(`receipt ${receiptId} was delivered twice`);
      const prompt: ArrivedPrompt = { at, subject: m.subject, receiptId, callerId: m.headers?.get(CALLER_ID_HEADER), envelope };
      arrived.set(receiptId, prompt);
      waiters.get(receiptId)?.(prompt);
    },
  });
  const failIfAny = () => {
    if (problems.length > 0) throw new WrongAnswerError(`the agent's prompts: ${problems.join('; ')}`);
  };
  return {
    async arrival(expected) {
      failIfAny();
      asked.add(expected.receiptId);
      const prompt =
        arrived.get(expected.receiptId) ??
        (await new Promise<ArrivedPrompt | undefined>((resolve) => {
          const timer = setTimeout(() => resolve(undefined), PROMPT_TIMEOUT_MS);
          waiters.set(expected.receiptId, (p) => {
            clearTimeout(timer);
            resolve(p);
          });
        }).finally(() => waiters.delete(expected.receiptId)));
      if (!prompt) throw new WrongAnswerError(`no prompt for receipt ${expected.receiptId} (task ${expected.task.taskId}) within ${PROMPT_TIMEOUT_MS} ms`);
      checkPrompt(topology, prompt, expected);
      return prompt;
    },
    stop() {
      subscription.unsubscribe();
      const strays = [...arrived.keys()].filter((id) => !asked.has(id));
      if (strays.length > 0) problems.push(`${strays.length} prompt(s) nobody sent, e.g. receipt ${strays[0]}`);
      failIfAny();
    },
  };
}

/** The prompt of `expected`'s receipt, as the dispatcher builds it. */
function checkPrompt(topology: Topology, prompt: ArrivedPrompt, expected: ExpectedPrompt): void {
  const { task, receiptId } = expected;
  const { content, ...data } = prompt.envelope.data ?? {};
  const actual = { ...data, subject: prompt.subject, caller_header: prompt.callerId, type: prompt.envelope.type, id: prompt.envelope.id };
  expectFields(
    `the prompt of receipt ${receiptId} (task ${task.taskId}, ${expected.deliveryKind})`,
    {
      ...actual,
      content_as_expected: content === expected.content,
      turn_id: typeof data.turn_id === 'string' && data.turn_id !== '',
      prompt_seq: typeof data.prompt_seq,
    },
    {
      ...{ subject: topology.agentPromptSubject(task.sessionId), caller_header: receiptId, type: SESSION_PROMPT, id: promptMsgId(receiptId) },
      ...{ receipt_id: receiptId, caller_id: receiptId, message_id: receiptId, task_id: task.taskId, session_id: task.sessionId },
      ...{ delivery_kind: expected.deliveryKind, content_as_expected: true, turn_id: true, prompt_seq: 'number' },
    },
  );
}

/**
 * One queue.enqueue carrying `task`'s comments, until its prompt reached the agent: the time from
 * the request to the prompt's arrival (ms). Anything but a fresh queued acceptance that consumed
 * every comment, or a prompt other than the one it must be, is a wrong answer.
 */
export async function enqueueUntilPrompt(
  client: PendingProjectorClient,
  agent: PromptAgent,
  task: SeededCommentedTask,
  typed: string,
  content: string,
): Promise<{ ms: number; receiptId: string }> {
  const callerId = randomUUID();
  const start = performance.now();
  const reply = await client.enqueue({ session_id: task.sessionId, caller_id: callerId, content: typed, plan_comment_refs: task.refs });
  const left = reply.ok ? reply.plan_comments?.comments.length : undefined;
  const expected = {
    ok: true,
    replayed: false,
    delivery_kind: 'queued',
    receipt_id: callerId,
    queue_id: callerId,
    session_id: task.sessionId,
    comments_left: 0,
  };
  expectFields(`queue.enqueue on task ${task.taskId}`, { ...reply, comments_left: left }, expected);
  // The prompt may have arrived before the reply: the dispatcher is kicked before the reply goes out.
  const prompt = await agent.arrival({ receiptId: callerId, task, deliveryKind: 'queued', content });
  return { ms: prompt.at - start, receiptId: callerId };
}
