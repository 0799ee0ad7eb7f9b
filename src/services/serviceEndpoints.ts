import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Topology } from '../events/subjects.js';
import { NatsPermissionError, subscriptionDenial } from '../events/natsPermissions.js';
import type { ClarificationService } from './clarificationService.js';
import { serveEndpoint, type AnyReply } from './endpoint.js';
import { ENDPOINTS, listPendingRequestSchema, respondRequestSchema, sessionRequestSchema, taskRequestSchema } from './requests.js';
import type { TaskService } from './taskService.js';
import type { PlanCommentService } from './planCommentService.js';
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

export interface ServiceEndpointsOptions {
  nc: NatsConnection;
  topology: Topology;
  clarifications: ClarificationService;
  tasks: TaskService;
  /** Absent: the plan-comment, message, queue and attachment endpoints are not served (embedders without them). */
  planComments?: PlanCommentService;
  logger: Logger;
  maxRequestBytes: number;
}

/**
 * The worker's request/reply endpoints under `<prefix>pending_projector.v1.` (docs/endpoints.md).
 * Each one validates its body and sends its service's reply value as it is.
 */
export async function startServiceEndpoints(options: ServiceEndpointsOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, topology, logger, maxRequestBytes, clarifications, tasks, planComments: plans } = options;
  const serve = <S extends z.ZodType>(name: string, schema: S, handler: (request: z.output<S>) => Promise<AnyReply>) =>
    serveEndpoint({ nc, logger, maxRequestBytes, subject: topology.serviceSubject(name), schema, handler });
  const endpoints = [
    serve(ENDPOINTS.summaryGet, taskRequestSchema, (request) => tasks.getSummary(request)),
    serve(ENDPOINTS.taskReproject, taskRequestSchema, (request) => tasks.reproject(request)),
    serve(ENDPOINTS.clarificationRespond, respondRequestSchema, (request) => clarifications.respond(request)),
    serve(ENDPOINTS.clarificationListPending, listPendingRequestSchema, (request) => clarifications.listPending(request)),
    serve(ENDPOINTS.clarificationDetach, sessionRequestSchema, (request) => clarifications.detach(request)),
    serve(ENDPOINTS.clarificationExpire, sessionRequestSchema, (request) => clarifications.expire(request)),
    serve(ENDPOINTS.sessionGuard, sessionRequestSchema, (request) => clarifications.guard(request)),
    serve(ENDPOINTS.sessionTurns, sessionRequestSchema, (request) => clarifications.turns(request)),
    serve(ENDPOINTS.taskPendingActions, taskRequestSchema, (request) => clarifications.pendingActions(request)),
    ...(plans
      ? [
          serve(ENDPOINTS.planCommentList, planCommentListSchema, (request) => plans.list(request)),
          serve(ENDPOINTS.planCommentCreate, planCommentCreateSchema, (request) => plans.create(request)),
          serve(ENDPOINTS.planCommentUpdate, planCommentUpdateSchema, (request) => plans.update(request)),
          serve(ENDPOINTS.planCommentDelete, planCommentDeleteSchema, (request) => plans.remove(request)),
          serve(ENDPOINTS.planCommentImportLegacy, importLegacySchema, (request) => plans.importLegacy(request)),
          serve(ENDPOINTS.planCommentRun, planCommentRunSchema, (request) => plans.run(request)),
          serve(ENDPOINTS.planDelete, planDeleteSchema, (request) => plans.deletePlan(request)),
          serve(ENDPOINTS.messageSend, messageSendSchema, (request) => plans.send(request)),
          serve(ENDPOINTS.queueEnqueue, queueEnqueueSchema, (request) => plans.enqueue(request)),
          serve(ENDPOINTS.queueList, queueListSchema, (request) => plans.listQueue(request)),
          serve(ENDPOINTS.attachmentStage, attachmentStageSchema, (request) => plans.stageAttachment(request)),
        ]
      : []),
  ];
  // A refused subscription is answered before the flush's PONG, and ends its endpoint's loop.
  await nc.flush();
  await new Promise((resolve) => setImmediate(resolve));
  const stop = async () => {
    await Promise.all(endpoints.map((e) => e.stop()));
  };
  const denials = endpoints.map((e) => subscriptionDenial(e.failure(), 'serving its request/reply endpoints')).filter((d) => d !== undefined);
  if (denials.length > 0) {
    await stop();
    throw new NatsPermissionError(denials);
  }
  return { stop };
}
