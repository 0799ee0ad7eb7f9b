/**
 * What a UI or a backend needs to talk to the worker: the typed client of its endpoints, their
 * request schemas and reply types, the subject names and the dependency-free turn rules. This is
 * the entry point of the light client package (packages/client), and the service package's main
 * entry re-exports it whole. Everything reachable from here at run time may import only zod and
 * `@nats-io/nats-core`: the light package's build refuses any other package.
 */
export { createPendingProjectorClient } from './pendingProjectorClient.js';
export type {
  AttachmentStageReply,
  CallOptions,
  ImportLegacyReply,
  PendingProjectorClient,
  PendingProjectorClientOptions,
  PlanCommentFailure,
  PlanCommentsReply,
  PromptReply,
  QueueListReply,
} from './pendingProjectorClient.js';
export * from '../services/planCommentRequests.js';
export type { AdmissionPayload, AttachmentPayload, PlanCommentPayload, PlanCommentsPayload, QueueEntryPayload } from '../services/planCommentWire.js';
export {
  ENDPOINTS,
  ANSWER_TEXT_MAX_CHARS,
  MAX_BUNDLE_QUESTIONS,
  answerSchema,
  listPendingRequestSchema,
  respondRequestSchema,
  sessionRequestSchema,
  taskRequestSchema,
} from '../services/requests.js';
export type { ListPendingRequest, RespondRequest, SessionRequest, TaskRequest } from '../services/requests.js';
export { REPLY_ERROR_CODES } from '../services/replyErrorCodes.js';
export type * from '../services/replies.js';
export type { ClarificationAnswerPayload, ClarificationDeliveryPayload } from '../services/clarifications/clarificationPorts.js';
export { MESSAGE_QUEUE_STATUS_CHANGED, PLAN_COMMENTS_UPDATED, SERVICE_SUBJECT_ROOT, topologyFor } from '../events/subjects.js';
export type { QueueStatusChangedData } from '../events/kandevEvents.js';
export type { Topology } from '../events/subjects.js';
export * from '../turns/index.js';
