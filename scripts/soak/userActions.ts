import { randomUUID } from 'node:crypto';
import type { PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import type { SeededRandom } from './seededRandom.js';
import type { SoakLedger, SoakTask } from './soakLedger.js';

/**
 * What users do through the worker's endpoints, at random, while everything else happens: answer
 * questions (several answers to one question at once, as two browser tabs would), write and delete
 * plan comments, send prompts carrying comments, queue them, Run them, and remove or reorder queue
 * entries while the dispatcher delivers them. Each request that gets no answer (a replica or the
 * server down) is sent again with the same caller id, as the client contract asks.
 */
export interface UserActions {
  act(): Promise<void>;
  /** Answers every pending question of the session: a queued prompt waits while one is live on the current turn. */
  answerPending(sessionId: string): Promise<void>;
}

const ACTIONS = {
  respond: 14,
  comment: 14,
  deleteComment: 3,
  send: 6,
  enqueue: 8,
  run: 4,
  removeQueued: 4,
  reorderQueue: 4,
} as const;

type Reply = { ok: true } | { ok: false; error: { code: string } };

/** Sends until the reply is an answer (anything but `unavailable` / `retryable`), at most 4 times. */
async function untilAnswered<R extends Reply>(call: () => Promise<R>): Promise<R> {
  let reply = await call();
  for (let attempt = 1; attempt < 4 && !reply.ok && (reply.error.code === 'unavailable' || reply.error.code === 'retryable'); attempt++) {
    await new Promise((r) => setTimeout(r, 500 * attempt));
    reply = await call();
  }
  return reply;
}

export function createUserActions(client: PendingProjectorClient, ctx: RepositoryContext, random: SeededRandom, ledger: SoakLedger): UserActions {
  const someTask = () => random.pick(ledger.liveTasks());

  /** A random subset (maybe empty) of the task's comments, at their current versions. */
  const someRefs = async (task: SoakTask, atLeastOne: boolean) => {
    const listed = await client.listPlanComments({ task_id: task.taskId });
    const comments = listed.ok ? (listed.plan_comments?.comments ?? []) : [];
    const refs = random.shuffled(comments).slice(0, random.int(atLeastOne ? 1 : 0, Math.min(3, comments.length)));
    return refs.map((c) => ({ id: c.id, version: c.version }));
  };

  const accepted = (callerId: string, task: SoakTask, kind: 'send' | 'enqueue' | 'run', reply: Reply) => {
    if (reply.ok) ledger.promptsAccepted.set(callerId, { taskId: task.taskId, kind });
    ledger.tally(kind, reply.ok);
  };

  /** Pending questions (their pending id and number of questions), of one session or of all. */
  const pendingQuestions = (sessionId?: string) =>
    rawRows<{ pending_id: string; n: number | string }>(
      ctx,
      `SELECT ${ctx.dialect.jsonString('metadata', 'pending_id')} AS pending_id, COUNT(*) AS n FROM task_session_messages
        WHERE type = 'clarification_request' AND ${ctx.dialect.jsonString('metadata', 'status')} = 'pending'${sessionId ? ' AND task_session_id = ?' : ''}
        GROUP BY 1 ORDER BY 1 LIMIT 50`,
      sessionId ? [sessionId] : [],
    );

  /** `concurrency` answers to one question at once; exactly one may claim it. */
  const respond = async (pendingId: string, questions: number, concurrency: number) => {
    const answers = (option: string) =>
      Array.from({ length: questions }, (_, i) => ({ question_id: `q${i + 1}`, selected_options: [option], custom_text: '' }));
    const replies = await Promise.all(
      Array.from({ length: concurrency }, () => client.respond({ pending_id: pendingId, answers: answers(random.pick(['a', 'b'])) })),
    );
    for (const r of replies) {
      if (r.ok && r.claimed) ledger.answersClaimed.add(pendingId);
      ledger.tally('respond', r.ok);
    }
  };

  const actions: Record<keyof typeof ACTIONS, () => Promise<void>> = {
    async respond() {
      const rows = await pendingQuestions();
      if (rows.length === 0) return;
      const { pending_id, n } = random.pick(rows);
      await respond(pending_id, Number(n), random.int(1, 3));
    },
    async comment() {
      const task = someTask();
      const commentId = `c-${randomUUID()}`;
      const reply = await untilAnswered(() =>
        client.createPlanComment({
          task_id: task.taskId,
          plan_id: task.planId,
          comment_id: commentId,
          // The id in the body: the final check finds it in the prompt that consumed it.
          body: `soak comment ${commentId}: please reconsider`,
          selected_text: '1. Change it.',
          anchor_from: 8,
          anchor_to: 21,
        }),
      );
      if (reply.ok && reply.comment) ledger.commentsCreated.set(reply.comment.id, task.taskId);
      ledger.tally('comment', reply.ok);
    },
    async deleteComment() {
      const task = someTask();
      const [ref] = await someRefs(task, true);
      if (!ref) return;
      const reply = await untilAnswered(() =>
        client.deletePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: ref.id, version: ref.version }),
      );
      if (reply.ok) ledger.commentsDeleted.add(ref.id);
      ledger.tally('deleteComment', reply.ok);
    },
    async send() {
      const task = someTask();
      const session = random.pick(task.sessions);
      const refs = await someRefs(task, false);
      const callerId = randomUUID();
      const request = { session_id: session.id, caller_id: callerId, content: `soak prompt ${callerId}`, ...(refs.length ? { plan_comment_refs: refs } : {}) };
      accepted(callerId, task, 'send', await untilAnswered(() => client.sendMessage(request)));
    },
    async enqueue() {
      const task = someTask();
      const session = random.pick(task.sessions);
      const refs = await someRefs(task, false);
      const callerId = randomUUID();
      const request = { session_id: session.id, caller_id: callerId, content: `soak queued ${callerId}`, ...(refs.length ? { plan_comment_refs: refs } : {}) };
      accepted(callerId, task, 'enqueue', await untilAnswered(() => client.enqueue(request)));
    },
    async run() {
      const task = someTask();
      const refs = await someRefs(task, true);
      if (refs.length === 0) return;
      const callerId = randomUUID();
      accepted(
        callerId,
        task,
        'run',
        await untilAnswered(() => client.runPlanComments({ task_id: task.taskId, caller_id: callerId, plan_comment_refs: refs })),
      );
    },
    async removeQueued() {
      const session = random.pick(someTask().sessions);
      const listed = await client.listQueue({ session_id: session.id });
      if (!listed.ok || listed.entries.length === 0) return;
      const entry = random.pick(listed.entries);
      const reply = await untilAnswered(() => client.removeQueueEntry({ session_id: session.id, queue_id: entry.id }));
      ledger.tally('removeQueued', reply.ok);
    },
    async reorderQueue() {
      const session = random.pick(someTask().sessions);
      const listed = await client.listQueue({ session_id: session.id });
      if (!listed.ok || listed.entries.length < 2) return;
      const order = random.shuffled(listed.entries.map((e) => e.id));
      const reply = await untilAnswered(() => client.reorderQueue({ session_id: session.id, queue_ids: order, revision: listed.revision }));
      ledger.tally('reorderQueue', reply.ok);
    },
  };
  return {
    act: () => actions[random.weighted(ACTIONS)](),
    async answerPending(sessionId) {
      for (const { pending_id, n } of await pendingQuestions(sessionId)) await respond(pending_id, Number(n), 1);
    },
  };
}
