/**
 * The package's public surface: the typed client of the worker's endpoints with their request and
 * reply types, the subject names, and the dependency-free turn rules shared with UI clients.
 */
export { createPendingProjectorClient } from './client/pendingProjectorClient.js';
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
} from './client/pendingProjectorClient.js';
export * from './services/planCommentRequests.js';
export type { AdmissionPayload, AttachmentPayload, PlanCommentPayload, PlanCommentsPayload, QueueEntryPayload } from './services/planCommentWire.js';
export {
  ENDPOINTS,
  ANSWER_TEXT_MAX_CHARS,
  MAX_BUNDLE_QUESTIONS,
  answerSchema,
  listPendingRequestSchema,
  respondRequestSchema,
  sessionRequestSchema,
  taskRequestSchema,
} from './services/requests.js';
export type { ListPendingRequest, RespondRequest, SessionRequest, TaskRequest } from './services/requests.js';
export { REPLY_ERROR_CODES } from './services/endpoint.js';
export type * from './services/replies.js';
export type { ClarificationAnswerPayload, ClarificationDeliveryPayload } from './services/clarificationPorts.js';
export { MESSAGE_QUEUE_STATUS_CHANGED, PLAN_COMMENTS_UPDATED, SERVICE_SUBJECT_ROOT, topologyFor } from './events/subjects.js';
export type { QueueStatusChangedData } from './events/kandevEvents.js';
export type { Topology } from './events/subjects.js';
export * from './turns/index.js';
