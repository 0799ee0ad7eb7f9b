import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Topology } from '../events/subjects.js';
import { NatsPermissionError, subscriptionDenial } from '../events/natsPermissions.js';
import type { ClarificationService } from './clarifications/clarificationService.js';
import { serveEndpoint, type AnyReply, type ReplyCode } from './endpoint.js';
import { ENDPOINT_REQUEST_SCHEMAS, type EndpointName, type EndpointRequest } from './endpointRequestSchemas.js';
import { ENDPOINTS } from './requests.js';
import { GUARD_FAILURE_FIELDS } from './replies.js';
import type { TaskService } from './tasks/taskService.js';
import type { PlanCommentService } from './planComments/planCommentService.js';
import type { PromptService } from './prompts/promptService.js';
import type { AttachmentService } from './attachments/attachmentService.js';
import type { Metrics } from '../metrics.js';

export interface ServiceEndpointsOptions {
  nc: NatsConnection;
  topology: Topology;
  clarifications: ClarificationService;
  tasks: TaskService;
  /** Absent: the plan-comment and plan.delete endpoints are not served (embedders without them). */
  planComments?: PlanCommentService;
  /** Absent: message.send, plan_comment.run and the queue endpoints are not served. */
  prompts?: PromptService;
  /** Absent: attachment.stage is not served. */
  attachments?: AttachmentService;
  logger: Logger;
  maxRequestBytes: number;
  /** Counts each endpoint's replies by code and observes their latency. */
  metrics?: Metrics;
}

/**
 * The worker's request/reply endpoints under `<prefix>pending_projector.v1.` (docs/endpoints.md).
 * Each one validates its body and sends its service's reply value as it is.
 */
export async function startServiceEndpoints(options: ServiceEndpointsOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, topology, logger, maxRequestBytes, clarifications, tasks, planComments: plans, prompts, attachments } = options;
  // Each endpoint's body is validated by its schema in ENDPOINT_REQUEST_SCHEMAS, the table the fuzz
  // tests walk. The handler is typed by that schema's output at each call below; the cast only
  // hides it from serveEndpoint, as TypeScript does not carry the table's indexed type through.
  const { metrics } = options;
  const observe = (endpoint: EndpointName) =>
    metrics
      ? (code: ReplyCode, seconds: number) => {
          metrics.endpointRequests.inc({ endpoint, code });
          metrics.endpointSeconds.observe({ endpoint }, seconds);
        }
      : undefined;
  const serve = <N extends EndpointName>(name: N, handler: (request: EndpointRequest<N>) => Promise<AnyReply>, failureFields?: Record<string, unknown>) =>
    serveEndpoint({
      nc,
      logger,
      maxRequestBytes,
      subject: topology.serviceSubject(name),
      schema: ENDPOINT_REQUEST_SCHEMAS[name] as z.ZodType,
      handler: handler as (request: unknown) => Promise<AnyReply>,
      observe: observe(name),
      failureFields,
    });
  const endpoints = [
    serve(ENDPOINTS.summaryGet, (request) => tasks.getSummary(request)),
    serve(ENDPOINTS.taskReproject, (request) => tasks.reproject(request)),
    serve(ENDPOINTS.clarificationRespond, (request) => clarifications.respond(request)),
    serve(ENDPOINTS.clarificationListPending, (request) => clarifications.listPending(request)),
    serve(ENDPOINTS.clarificationDetach, (request) => clarifications.detach(request)),
    serve(ENDPOINTS.clarificationExpire, (request) => clarifications.expire(request)),
    // Fails closed whatever failed, a body it could not read included.
    serve(ENDPOINTS.sessionGuard, (request) => clarifications.guard(request), GUARD_FAILURE_FIELDS),
    serve(ENDPOINTS.sessionTurns, (request) => clarifications.turns(request)),
    serve(ENDPOINTS.taskPendingActions, (request) => clarifications.pendingActions(request)),
    ...(plans
      ? [
          serve(ENDPOINTS.planCommentList, (request) => plans.list(request)),
          serve(ENDPOINTS.planCommentCreate, (request) => plans.create(request)),
          serve(ENDPOINTS.planCommentUpdate, (request) => plans.update(request)),
          serve(ENDPOINTS.planCommentDelete, (request) => plans.remove(request)),
          serve(ENDPOINTS.planCommentImportLegacy, (request) => plans.importLegacy(request)),
          serve(ENDPOINTS.planDelete, (request) => plans.deletePlan(request)),
        ]
      : []),
    ...(prompts
      ? [
          serve(ENDPOINTS.planCommentRun, (request) => prompts.run(request)),
          serve(ENDPOINTS.messageSend, (request) => prompts.send(request)),
          serve(ENDPOINTS.queueEnqueue, (request) => prompts.enqueue(request)),
          serve(ENDPOINTS.queueList, (request) => prompts.listQueue(request)),
        ]
      : []),
    ...(attachments ? [serve(ENDPOINTS.attachmentStage, (request) => attachments.stageAttachment(request))] : []),
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
