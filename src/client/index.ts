/**
 * What a UI or a backend needs to talk to the worker: the typed client of its endpoints, their
 * request schemas and reply types, the subject names and the dependency-free turn rules. This is
 * the entry point of the light client package (packages/client), and the service package's main
 * entry re-exports it whole. Everything reachable from here at run time may import only zod and
 * `@nats-io/nats-core`: the light package's build refuses any other package.
 */
export { createPendingProjectorClient } from './pendingProjectorClient.js';
export type { CallOptions, EndpointMethods, PendingProjectorClient, PendingProjectorClientOptions } from './pendingProjectorClient.js';
export { ENDPOINTS, ENDPOINT_TABLE } from '../contract/endpoints.js';
export type { EndpointMethod, EndpointName, EndpointReplyOf, EndpointRequestOf, EndpointSpec } from '../contract/endpoints.js';
export * from '../contract/planCommentRequests.js';
export type { AdmissionPayload, AttachmentPayload, PlanCommentPayload, PlanCommentsPayload, QueueEntryPayload } from '../contract/planCommentPayloads.js';
export type {
  AttachmentStageReply,
  ImportLegacyReply,
  PlanCommentFailure,
  PlanCommentsReply,
  PromptReply,
  QueueListReply,
} from '../contract/planCommentReplies.js';
export {
  ANSWER_TEXT_MAX_CHARS,
  MAX_BUNDLE_QUESTIONS,
  answerSchema,
  listPendingRequestSchema,
  respondRequestSchema,
  sessionRequestSchema,
  taskRequestSchema,
} from '../contract/requests.js';
export type { ListPendingRequest, RespondRequest, SessionRequest, TaskRequest } from '../contract/requests.js';
export { REPLY_ERROR_CODES } from '../contract/replyErrorCodes.js';
export type * from '../contract/replies.js';
export type { PublishedSummary } from '../contract/publishedSummary.js';
export type { ClarificationAnswerPayload, ClarificationDeliveryPayload } from '../contract/clarificationPayloads.js';
export { MESSAGE_QUEUE_STATUS_CHANGED, PLAN_COMMENTS_CHANGED, SERVICE_SUBJECT_ROOT, TASK_PLAN_DELETED, topologyFor } from '../contract/subjects.js';
export type { QueueStatusChangedData, TaskPlanDeletedData } from '../contract/kandevEvents.js';
export type { Topology } from '../contract/subjects.js';
export * from '../turns/index.js';
