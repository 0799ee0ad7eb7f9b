/**
 * The package's public surface: the typed client of the worker's endpoints with their request and
 * reply types, the subject names, and the dependency-free turn rules shared with UI clients.
 */
export { createPendingProjectorClient } from './client/pendingProjectorClient.js';
export type { CallOptions, PendingProjectorClient, PendingProjectorClientOptions } from './client/pendingProjectorClient.js';
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
export { SERVICE_SUBJECT_ROOT, topologyFor } from './events/subjects.js';
export type { Topology } from './events/subjects.js';
export * from './turns/index.js';
