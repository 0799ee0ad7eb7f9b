import type { NatsConnection } from '@nats-io/nats-core';
import { topologyFor } from '../events/subjects.js';
import type {
  DetachReply,
  ExpireReply,
  GuardReply,
  ListPendingReply,
  PendingActionsReply,
  ReplyFailure,
  ReprojectReply,
  RespondReply,
  SummaryReply,
  TurnsReply,
} from '../services/replies.js';
import type {
  AttachmentStageRequest,
  ImportLegacyRequest,
  MessageSendRequest,
  PlanCommentCreateRequest,
  PlanCommentDeleteRequest,
  PlanCommentListRequest,
  PlanCommentRunRequest,
  PlanCommentUpdateRequest,
  PlanDeleteRequest,
  QueueEnqueueRequest,
  QueueListRequest,
} from '../services/planCommentRequests.js';
import type { AdmissionPayload, AttachmentPayload, PlanCommentPayload, PlanCommentsPayload, QueueEntryPayload } from '../services/planCommentWire.js';
import { ENDPOINTS, type ListPendingRequest, type RespondRequest, type SessionRequest, type TaskRequest } from '../services/requests.js';

export interface PendingProjectorClientOptions {
  /** The deployment's subject prefix (e.g. "acme."), as given to the worker. */
  prefix?: string;
  /** Reply timeout of every call but respond. Default 10 s. */
  timeoutMs?: number;
  /**
   * Reply timeout of respond, which may wait for the agent's confirmation or the resume deadline
   * and then a summary refresh. Default 65 s (twice the worker's default 30 s deadline, plus margin).
   */
  respondTimeoutMs?: number;
}

/**
 * A failure of the plan-comment, message and attachment endpoints: `reason` (machine-readable) and
 * its details beside `error`; `plan_comments` is the current collection on `plan_comments_changed`.
 */
export type PlanCommentFailure = ReplyFailure & { reason?: string; plan_comments?: PlanCommentsPayload; primary_session_id?: string | null; state?: string; attachment_ids?: string[] } & Record<string, unknown>;
export type PlanCommentsReply<T extends object = object> = ({ ok: true; plan_comments: PlanCommentsPayload } & T) | PlanCommentFailure;
/** An accepted prompt (its admission); `queue_full` failures carry `count` and `max`. */
export type PromptReply = AdmissionPayload | PlanCommentFailure;
export type QueueListReply = { ok: true; entries: QueueEntryPayload[]; count: number; max: number } | PlanCommentFailure;
export type AttachmentStageReply = { ok: true; replayed: boolean; attachment: AttachmentPayload } | PlanCommentFailure;
export type ImportLegacyReply = PlanCommentsReply<{ imported: string[]; skipped: Array<{ id: string; sessionId: string; reason: string }> }>;

export interface CallOptions {
  timeoutMs?: number;
}

/** A typed client for the worker's endpoints. */
export interface PendingProjectorClient {
  /** Answers or rejects a clarification bundle. A `retryable` reply means: send the same request again. */
  respond(request: RespondRequest, options?: CallOptions): Promise<RespondReply>;
  listPending(request: ListPendingRequest, options?: CallOptions): Promise<ListPendingReply>;
  detach(request: SessionRequest, options?: CallOptions): Promise<DetachReply>;
  expire(request: SessionRequest, options?: CallOptions): Promise<ExpireReply>;
  /** Fails closed: any failure, including an unreachable worker, carries `blocked: true`. */
  guard(request: SessionRequest, options?: CallOptions): Promise<GuardReply>;
  turns(request: SessionRequest, options?: CallOptions): Promise<TurnsReply>;
  pendingActions(request: TaskRequest, options?: CallOptions): Promise<PendingActionsReply>;
  getSummary(request: TaskRequest, options?: CallOptions): Promise<SummaryReply>;
  reproject(request: TaskRequest, options?: CallOptions): Promise<ReprojectReply>;
  listPlanComments(request: PlanCommentListRequest, options?: CallOptions): Promise<PlanCommentsReply>;
  /** Idempotent by `comment_id`; a replay after the comment was consumed returns `comment: null`. */
  createPlanComment(request: PlanCommentCreateRequest, options?: CallOptions): Promise<PlanCommentsReply<{ replayed: boolean; comment: PlanCommentPayload | null }>>;
  updatePlanComment(request: PlanCommentUpdateRequest, options?: CallOptions): Promise<PlanCommentsReply<{ comment: PlanCommentPayload }>>;
  deletePlanComment(request: PlanCommentDeleteRequest, options?: CallOptions): Promise<PlanCommentsReply<{ deleted: boolean }>>;
  deletePlan(request: PlanDeleteRequest, options?: CallOptions): Promise<PlanCommentsReply<{ deleted: boolean }>>;
  importLegacyPlanComments(request: ImportLegacyRequest, options?: CallOptions): Promise<ImportLegacyReply>;
  stageAttachment(request: AttachmentStageRequest, options?: CallOptions): Promise<AttachmentStageReply>;
  /**
   * Sends a prompt to exactly `session_id`. `caller_id` is the caller's (a UUID it reuses on a
   * retry, never generated here): an `unavailable` reply (a timeout) means send the same request again.
   */
  sendMessage(request: MessageSendRequest, options?: CallOptions): Promise<PromptReply>;
  /** Run: the comments to the task's current primary session. */
  runPlanComments(request: PlanCommentRunRequest, options?: CallOptions): Promise<PromptReply>;
  /** Queues a prompt for `session_id`, delivered in turn by the dispatcher; `caller_id` as for sendMessage. */
  enqueue(request: QueueEnqueueRequest, options?: CallOptions): Promise<PromptReply>;
  /** The session's waiting queued prompts, in queue order. */
  listQueue(request: QueueListRequest, options?: CallOptions): Promise<QueueListReply>;
}

const encoder = new TextEncoder();

// The caller's connection may come from another copy of @nats-io/nats-core than this module would
// import (a UI's own bundle, or a transport pinned to another version than the newest core npm
// installs for our peer range), and `instanceof` does not recognise another copy's error classes.
// The errors are recognised by their shape, which every 3.x copy shares.
const isNoResponders = (err: unknown): boolean =>
  typeof (err as { isNoResponders?: unknown } | null)?.isNoResponders === 'function' && (err as { isNoResponders(): boolean }).isNoResponders();
const isTimeout = (err: unknown): boolean => err instanceof Error && err.name === 'TimeoutError';

/**
 * Creates the client on an open connection. Transport failures become replies too: no worker
 * listening or no reply in time is `{ok: false, error: {code: 'unavailable'}}` (for respond the
 * outcome is then unknown; resending the same request is safe and returns it).
 */
export function createPendingProjectorClient(nc: NatsConnection, options: PendingProjectorClientOptions = {}): PendingProjectorClient {
  const topology = topologyFor(options.prefix ?? '');
  const defaultTimeoutMs = options.timeoutMs ?? 10_000;
  const call = async <T>(name: string, body: object, timeoutMs: number): Promise<T | ReplyFailure> => {
    const subject = topology.serviceSubject(name);
    try {
      const reply = await nc.request(subject, encoder.encode(JSON.stringify(body)), { timeout: timeoutMs });
      return reply.json<T>();
    } catch (err) {
      if (isNoResponders(err)) {
        return { ok: false, error: { code: 'unavailable', message: `no pending-projector worker serves ${subject}` } };
      }
      if (isTimeout(err)) {
        return { ok: false, error: { code: 'unavailable', message: `no reply on ${subject} within ${timeoutMs} ms; the outcome is unknown` } };
      }
      return { ok: false, error: { code: 'unavailable', message: (err as Error).message } };
    }
  };
  const timeout = (o?: CallOptions) => o?.timeoutMs ?? defaultTimeoutMs;
  return {
    respond: (request, o) => call<RespondReply>(ENDPOINTS.clarificationRespond, request, o?.timeoutMs ?? options.respondTimeoutMs ?? 65_000),
    listPending: (request, o) => call<ListPendingReply>(ENDPOINTS.clarificationListPending, request, timeout(o)),
    detach: (request, o) => call<DetachReply>(ENDPOINTS.clarificationDetach, request, timeout(o)),
    expire: (request, o) => call<ExpireReply>(ENDPOINTS.clarificationExpire, request, timeout(o)),
    async guard(request, o) {
      const reply = await call<GuardReply>(ENDPOINTS.sessionGuard, request, timeout(o));
      return reply.ok ? reply : { ...reply, blocked: true, live: true };
    },
    turns: (request, o) => call<TurnsReply>(ENDPOINTS.sessionTurns, request, timeout(o)),
    pendingActions: (request, o) => call<PendingActionsReply>(ENDPOINTS.taskPendingActions, request, timeout(o)),
    getSummary: (request, o) => call<SummaryReply>(ENDPOINTS.summaryGet, request, timeout(o)),
    reproject: (request, o) => call<ReprojectReply>(ENDPOINTS.taskReproject, request, timeout(o)),
    listPlanComments: (request, o) => call(ENDPOINTS.planCommentList, request, timeout(o)),
    createPlanComment: (request, o) => call(ENDPOINTS.planCommentCreate, request, timeout(o)),
    updatePlanComment: (request, o) => call(ENDPOINTS.planCommentUpdate, request, timeout(o)),
    deletePlanComment: (request, o) => call(ENDPOINTS.planCommentDelete, request, timeout(o)),
    deletePlan: (request, o) => call(ENDPOINTS.planDelete, request, timeout(o)),
    importLegacyPlanComments: (request, o) => call(ENDPOINTS.planCommentImportLegacy, request, timeout(o)),
    stageAttachment: (request, o) => call(ENDPOINTS.attachmentStage, request, timeout(o)),
    sendMessage: (request, o) => call(ENDPOINTS.messageSend, request, timeout(o)),
    runPlanComments: (request, o) => call(ENDPOINTS.planCommentRun, request, timeout(o)),
    enqueue: (request, o) => call(ENDPOINTS.queueEnqueue, request, timeout(o)),
    listQueue: (request, o) => call(ENDPOINTS.queueList, request, timeout(o)),
  };
}
