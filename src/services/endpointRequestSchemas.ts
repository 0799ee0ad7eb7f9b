import type { z } from 'zod';
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
  queueListSchema,
} from './planCommentRequests.js';
import { ENDPOINTS, listPendingRequestSchema, respondRequestSchema, sessionRequestSchema, taskRequestSchema } from './requests.js';

/** An endpoint's name, the last tokens of its subject (`summary.get`). */
export type EndpointName = (typeof ENDPOINTS)[keyof typeof ENDPOINTS];

/**
 * The request schema of every endpoint, by name: the one table the endpoints are served from
 * (startServiceEndpoints takes each one's schema here) and that the fuzz tests walk. Typed so that
 * a name added to ENDPOINTS without a schema here does not compile, and so is never served or
 * fuzzed without one.
 */
export const ENDPOINT_REQUEST_SCHEMAS = {
  [ENDPOINTS.summaryGet]: taskRequestSchema,
  [ENDPOINTS.taskReproject]: taskRequestSchema,
  [ENDPOINTS.clarificationRespond]: respondRequestSchema,
  [ENDPOINTS.clarificationListPending]: listPendingRequestSchema,
  [ENDPOINTS.clarificationDetach]: sessionRequestSchema,
  [ENDPOINTS.clarificationExpire]: sessionRequestSchema,
  [ENDPOINTS.sessionGuard]: sessionRequestSchema,
  [ENDPOINTS.sessionTurns]: sessionRequestSchema,
  [ENDPOINTS.taskPendingActions]: taskRequestSchema,
  [ENDPOINTS.planCommentList]: planCommentListSchema,
  [ENDPOINTS.planCommentCreate]: planCommentCreateSchema,
  [ENDPOINTS.planCommentUpdate]: planCommentUpdateSchema,
  [ENDPOINTS.planCommentDelete]: planCommentDeleteSchema,
  [ENDPOINTS.planCommentImportLegacy]: importLegacySchema,
  [ENDPOINTS.planCommentRun]: planCommentRunSchema,
  [ENDPOINTS.planDelete]: planDeleteSchema,
  [ENDPOINTS.messageSend]: messageSendSchema,
  [ENDPOINTS.queueEnqueue]: queueEnqueueSchema,
  [ENDPOINTS.queueList]: queueListSchema,
  [ENDPOINTS.attachmentStage]: attachmentStageSchema,
} as const satisfies Record<EndpointName, z.ZodType>;

export type EndpointRequest<N extends EndpointName> = z.output<(typeof ENDPOINT_REQUEST_SCHEMAS)[N]>;
