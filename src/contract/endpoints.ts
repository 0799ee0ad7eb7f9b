import type { z } from 'zod';
import type { PlanCommentPayload } from './planCommentPayloads.js';
import type {
  AttachmentStageReply,
  ImportLegacyReply,
  PlanCommentsReply,
  PromptReply,
  QueueAutoRunReply,
  QueueDrainReply,
  QueueListReply,
  QueueReorderReply,
  QueueUpdateReply,
  QueueWithdrawalReply,
} from './planCommentReplies.js';
import {
  attachmentStageSchema,
  importLegacySchema,
  messageSendSchema,
  planCommentCreateSchema,
  planCommentDeleteSchema,
  planCommentListSchema,
  planCommentRunSchema,
  planCommentUpdateSchema,
  planDeleteSchema,
  queueEnqueueSchema,
  queueClearSchema,
  queueDrainSchema,
  queueListSchema,
  queueRemoveSchema,
  queueReorderSchema,
  queueSetAutoRunSchema,
  queueUpdateSchema,
} from './planCommentRequests.js';
import {
  GUARD_FAILURE_FIELDS,
  type DetachReply,
  type ExpireReply,
  type GuardReply,
  type ListPendingReply,
  type PendingActionsReply,
  type ReprojectReply,
  type TaskListReply,
  type ConsumerStatsReply,
  type ReplicaStatsReply,
  type DeadLetterListReply,
  type DeadLetterRetryReply,
  type DeadLetterShowReply,
  type SummaryVerifyReply,
  type RespondReply,
  type SummaryReply,
  type TurnsReply,
} from './replies.js';
import {
  deadLetterIdSchema,
  deadLetterListSchema,
  listPendingRequestSchema,
  noArgumentsSchema,
  respondRequestSchema,
  sessionRequestSchema,
  summaryVerifySchema,
  taskListRequestSchema,
  taskRequestSchema,
} from './requests.js';

/** One endpoint of the worker, served on `<prefix>pending_projector.v1.<name>`. */
export interface EndpointSpec {
  /** Its key in ENDPOINTS (`summaryGet`). */
  key: string;
  /** The last tokens of its subject (`summary.get`). */
  name: string;
  /** Validates the body before any handler runs; a body it refuses is answered `bad_request`. */
  request: z.ZodType;
  /** Its reply type, carried by the types only (the value is undefined). */
  reply: unknown;
  /** Fields every failure reply carries, whoever produced it: the worker, or the client for a transport failure. */
  failureFields?: Readonly<Record<string, unknown>>;
  /**
   * Served by every replica, not by one of the replicas' queue group: each answers for itself, and
   * the typed client gathers the replies (per-process numbers no single replica knows).
   */
  everyReplica?: true;
}

/** Marks an entry's reply type; at run time there is nothing to carry. */
const replyType = <R>(): R => undefined as R;

/**
 * The endpoint table: every endpoint once, by the typed client's method name, with its name, its
 * request schema and its reply type. The worker serves its routes from it, the typed client's
 * methods are typed from it (the comments below are theirs), ENDPOINTS and ENDPOINT_REQUEST_SCHEMAS
 * are derived from it, and a test holds docs/endpoints.md's headings to it.
 */
export const ENDPOINT_TABLE = {
  /** Answers or rejects a clarification bundle. A `retryable` reply means: send the same request again. */
  respond: { key: 'clarificationRespond', name: 'clarification.respond', request: respondRequestSchema, reply: replyType<RespondReply>() },
  listPending: { key: 'clarificationListPending', name: 'clarification.list_pending', request: listPendingRequestSchema, reply: replyType<ListPendingReply>() },
  detach: { key: 'clarificationDetach', name: 'clarification.detach', request: sessionRequestSchema, reply: replyType<DetachReply>() },
  expire: { key: 'clarificationExpire', name: 'clarification.expire', request: sessionRequestSchema, reply: replyType<ExpireReply>() },
  /** Fails closed: any failure, including an unreachable worker, carries `blocked: true`. */
  guard: { key: 'sessionGuard', name: 'session.guard', request: sessionRequestSchema, reply: replyType<GuardReply>(), failureFields: GUARD_FAILURE_FIELDS },
  turns: { key: 'sessionTurns', name: 'session.turns', request: sessionRequestSchema, reply: replyType<TurnsReply>() },
  pendingActions: { key: 'taskPendingActions', name: 'task.pending_actions', request: taskRequestSchema, reply: replyType<PendingActionsReply>() },
  getSummary: { key: 'summaryGet', name: 'summary.get', request: taskRequestSchema, reply: replyType<SummaryReply>() },
  reproject: { key: 'taskReproject', name: 'task.reproject', request: taskRequestSchema, reply: replyType<ReprojectReply>() },
  /** A page of tasks with their summaries, each stale `pending_action` repaired (and published) before the reply. */
  listTasks: { key: 'taskList', name: 'task.list', request: taskListRequestSchema, reply: replyType<TaskListReply>() },
  /** The dead-letter records, oldest first (operations). */
  listDeadLetters: { key: 'deadLetterList', name: 'dead_letter.list', request: deadLetterListSchema, reply: replyType<DeadLetterListReply>() },
  /** One record with the original event, while the events stream still holds it. */
  showDeadLetter: { key: 'deadLetterShow', name: 'dead_letter.show', request: deadLetterIdSchema, reply: replyType<DeadLetterShowReply>() },
  /** Republishes the original event on its subject and removes the record. */
  retryDeadLetter: { key: 'deadLetterRetry', name: 'dead_letter.retry', request: deadLetterIdSchema, reply: replyType<DeadLetterRetryReply>() },
  /** The worker's durable consumer: pending, ack-pending and redelivered events, and the dead letters held. */
  consumerStats: { key: 'consumerStats', name: 'consumer.stats', request: noArgumentsSchema, reply: replyType<ConsumerStatsReply>() },
  /** Every replica's own events by outcome, start time and held partitions (each replica answers; the client gathers them). */
  replicaStats: { key: 'replicaStats', name: 'replica.stats', request: noArgumentsSchema, reply: replyType<ReplicaStatsReply>(), everyReplica: true },
  /** A page of a dry-run verify: the tasks whose stored summary differs from a fresh derivation. Writes nothing. */
  verifySummaries: { key: 'summaryVerify', name: 'summary.verify', request: summaryVerifySchema, reply: replyType<SummaryVerifyReply>() },
  listPlanComments: { key: 'planCommentList', name: 'plan_comment.list', request: planCommentListSchema, reply: replyType<PlanCommentsReply>() },
  /** Idempotent by `comment_id`; a replay after the comment was consumed returns `comment: null`. */
  createPlanComment: {
    key: 'planCommentCreate',
    name: 'plan_comment.create',
    request: planCommentCreateSchema,
    reply: replyType<PlanCommentsReply<{ replayed: boolean; comment: PlanCommentPayload | null }>>(),
  },
  updatePlanComment: {
    key: 'planCommentUpdate',
    name: 'plan_comment.update',
    request: planCommentUpdateSchema,
    reply: replyType<PlanCommentsReply<{ comment: PlanCommentPayload }>>(),
  },
  deletePlanComment: {
    key: 'planCommentDelete',
    name: 'plan_comment.delete',
    request: planCommentDeleteSchema,
    reply: replyType<PlanCommentsReply<{ deleted: boolean }>>(),
  },
  deletePlan: { key: 'planDelete', name: 'plan.delete', request: planDeleteSchema, reply: replyType<PlanCommentsReply<{ deleted: boolean }>>() },
  importLegacyPlanComments: {
    key: 'planCommentImportLegacy',
    name: 'plan_comment.import_legacy',
    request: importLegacySchema,
    reply: replyType<ImportLegacyReply>(),
  },
  stageAttachment: { key: 'attachmentStage', name: 'attachment.stage', request: attachmentStageSchema, reply: replyType<AttachmentStageReply>() },
  /**
   * Sends a prompt to exactly `session_id`. `caller_id` is the caller's (a UUID it reuses on a
   * retry, never generated here): an `unavailable` reply (a timeout) means send the same request again.
   */
  sendMessage: { key: 'messageSend', name: 'message.send', request: messageSendSchema, reply: replyType<PromptReply>() },
  /** Run: the comments to the task's current primary session, direct when it is idle, queued for it when it is busy (`delivery_kind` says which). */
  runPlanComments: { key: 'planCommentRun', name: 'plan_comment.run', request: planCommentRunSchema, reply: replyType<PromptReply>() },
  /** Queues a prompt for `session_id`, delivered in turn by the dispatcher; `caller_id` as for sendMessage. */
  enqueue: { key: 'queueEnqueue', name: 'queue.enqueue', request: queueEnqueueSchema, reply: replyType<PromptReply>() },
  /** The session's waiting queued prompts, in queue order. */
  listQueue: { key: 'queueList', name: 'queue.list', request: queueListSchema, reply: replyType<QueueListReply>() },
  /** Removes one waiting entry; its consumed comments return to the collection, its attachments to staged. */
  removeQueueEntry: { key: 'queueRemove', name: 'queue.remove', request: queueRemoveSchema, reply: replyType<QueueWithdrawalReply>() },
  /** Removes every waiting entry of the session at once (entries being delivered stay). */
  clearQueue: { key: 'queueClear', name: 'queue.clear', request: queueClearSchema, reply: replyType<QueueWithdrawalReply>() },
  /** Edits one waiting entry at the `version` `listQueue` showed; never its consumed comments. */
  updateQueueEntry: { key: 'queueUpdate', name: 'queue.update', request: queueUpdateSchema, reply: replyType<QueueUpdateReply>() },
  /** Rewrites the waiting order at the `revision` `listQueue` showed; `queue_ids` names every waiting entry once. */
  reorderQueue: { key: 'queueReorder', name: 'queue.reorder', request: queueReorderSchema, reply: replyType<QueueReorderReply>() },
  /** Pauses (`auto_run: false`) or resumes the session's automatic queue delivery, durably. */
  setQueueAutoRun: { key: 'queueSetAutoRun', name: 'queue.set_auto_run', request: queueSetAutoRunSchema, reply: replyType<QueueAutoRunReply>() },
  /** Delivers exactly the session's head now if the session can take a prompt, paused or not; waits for the delivery. */
  drainQueue: { key: 'queueDrain', name: 'queue.drain', request: queueDrainSchema, reply: replyType<QueueDrainReply>() },
} as const satisfies Record<string, EndpointSpec>;

type Table = typeof ENDPOINT_TABLE;

/** An endpoint as the typed client's method name calls it (`getSummary`). */
export type EndpointMethod = keyof Table;
/** An endpoint's name, the last tokens of its subject (`summary.get`). */
export type EndpointName = Table[EndpointMethod]['name'];
/** What a caller sends to the endpoint of `M` (zod's input: defaults may be left out). */
export type EndpointRequestOf<M extends EndpointMethod> = z.input<Table[M]['request']>;
/** The body the endpoint of `M` hands its handler, once its schema parsed it (defaults filled in). */
export type ParsedEndpointRequestOf<M extends EndpointMethod> = z.output<Table[M]['request']>;
/** What the endpoint of `M` replies. */
export type EndpointReplyOf<M extends EndpointMethod> = Table[M]['reply'];

/** The table's entries, in its order. */
export const ENDPOINT_SPECS: ReadonlyArray<Table[EndpointMethod] & { method: EndpointMethod }> = Object.entries(ENDPOINT_TABLE).map(([method, spec]) => ({
  ...spec,
  method: method as EndpointMethod,
}));

type ByName<N extends EndpointName> = Extract<Table[EndpointMethod], { name: N }>;

/** Endpoint names by key; the subject is `<prefix>pending_projector.v1.<name>`. */
export const ENDPOINTS = Object.fromEntries(ENDPOINT_SPECS.map((spec) => [spec.key, spec.name])) as {
  readonly [M in EndpointMethod as Table[M]['key']]: Table[M]['name'];
};

/** The request schema of every endpoint, by name: the table the fuzz tests walk. */
export const ENDPOINT_REQUEST_SCHEMAS = Object.fromEntries(ENDPOINT_SPECS.map((spec) => [spec.name, spec.request])) as {
  readonly [N in EndpointName]: ByName<N>['request'];
};

/** The body a handler of endpoint `N` is given, once its schema parsed it. */
type EndpointRequest<N extends EndpointName> = z.output<ByName<N>['request']>;
