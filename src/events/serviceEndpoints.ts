import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import {
  ENDPOINT_SPECS,
  type EndpointMethod,
  type EndpointReplyOf,
  type EndpointName,
  type EndpointSpec,
  type ParsedEndpointRequestOf,
} from '../contract/endpoints.js';
import type { AnyReply } from '../contract/replyErrorCodes.js';
import type { Topology } from '../contract/subjects.js';
import type { Metrics } from '../metrics.js';
import type { ClarificationService } from '../services/clarifications/clarificationService.js';
import type { PlanCommentService } from '../services/planComments/planCommentService.js';
import type { PromptService } from '../services/prompts/promptService.js';
import type { AttachmentService } from '../services/attachments/attachmentService.js';
import type { TaskService } from '../services/tasks/taskService.js';
import type { OperationsService } from '../services/operations/operationsService.js';
import { NatsPermissionError, subscriptionDenial } from './natsPermissions.js';
import { serveEndpoint, type ReplyCode } from './serveEndpoint.js';

/** The handler of each endpoint of ENDPOINT_TABLE: its parsed body in, its reply value out. */
type EndpointHandlers = { [M in EndpointMethod]: (request: ParsedEndpointRequestOf<M>) => Promise<EndpointReplyOf<M>> };

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
  /** Absent: the dead_letter.*, consumer.stats, replica.stats and summary.verify endpoints are not served. */
  operations?: OperationsService;
  logger: Logger;
  maxRequestBytes: number;
  /** Counts each endpoint's replies by code and observes their latency. */
  metrics?: Metrics;
}

/** The services' methods behind the endpoints; each family only with its service. */
function endpointHandlers({
  clarifications,
  tasks,
  planComments: plans,
  prompts,
  attachments,
  operations: ops,
}: ServiceEndpointsOptions): Partial<EndpointHandlers> {
  const core = {
    getSummary: (request) => tasks.getSummary(request),
    reproject: (request) => tasks.reproject(request),
    listTasks: (request) => tasks.listTasks(request),
    respond: (request) => clarifications.respond(request),
    listPending: (request) => clarifications.listPending(request),
    detach: (request) => clarifications.detach(request),
    expire: (request) => clarifications.expire(request),
    guard: (request) => clarifications.guard(request),
    turns: (request) => clarifications.turns(request),
    pendingActions: (request) => clarifications.pendingActions(request),
  } satisfies Partial<EndpointHandlers>;
  const planComments = plans
    ? ({
        listPlanComments: (request) => plans.list(request),
        createPlanComment: (request) => plans.create(request),
        updatePlanComment: (request) => plans.update(request),
        deletePlanComment: (request) => plans.remove(request),
        importLegacyPlanComments: (request) => plans.importLegacy(request),
        deletePlan: (request) => plans.deletePlan(request),
      } satisfies Partial<EndpointHandlers>)
    : undefined;
  const promptHandlers = prompts
    ? ({
        runPlanComments: (request) => prompts.run(request),
        sendMessage: (request) => prompts.send(request),
        enqueue: (request) => prompts.enqueue(request),
        listQueue: (request) => prompts.listQueue(request),
        removeQueueEntry: (request) => prompts.removeQueueEntry(request),
        clearQueue: (request) => prompts.clearQueue(request),
        updateQueueEntry: (request) => prompts.updateQueueEntry(request),
        reorderQueue: (request) => prompts.reorderQueue(request),
        setQueueAutoRun: (request) => prompts.setQueueAutoRun(request),
        drainQueue: (request) => prompts.drainQueue(request),
      } satisfies Partial<EndpointHandlers>)
    : undefined;
  const attachmentHandlers = attachments
    ? ({ stageAttachment: (request) => attachments.stageAttachment(request) } satisfies Partial<EndpointHandlers>)
    : undefined;
  const operations = ops
    ? ({
        listDeadLetters: (request) => ops.listDeadLetters(request),
        showDeadLetter: (request) => ops.showDeadLetter(request),
        retryDeadLetter: (request) => ops.retryDeadLetter(request),
        consumerStats: () => ops.consumerStats(),
        replicaStats: () => ops.replicaStats(),
        verifySummaries: (request) => ops.verifySummaries(request),
      } satisfies Partial<EndpointHandlers>)
    : undefined;
  if (planComments && promptHandlers && attachmentHandlers && operations) {
    // Complete: an endpoint added to the table without a handler here does not compile.
    return { ...core, ...planComments, ...promptHandlers, ...attachmentHandlers, ...operations } satisfies EndpointHandlers;
  }
  return { ...core, ...planComments, ...promptHandlers, ...attachmentHandlers, ...operations };
}

/**
 * The worker's request/reply endpoints under `<prefix>pending_projector.v1.` (docs/endpoints.md),
 * one per entry of ENDPOINT_TABLE that has a handler. Each one validates its body with the table's
 * schema and sends its service's reply value as it is.
 */
export async function startServiceEndpoints(options: ServiceEndpointsOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, topology, logger, maxRequestBytes, metrics } = options;
  const observe = (endpoint: EndpointName) =>
    metrics
      ? (code: ReplyCode, seconds: number) => {
          metrics.endpointRequests.inc({ endpoint, code });
          metrics.endpointSeconds.observe({ endpoint }, seconds);
        }
      : undefined;
  const handlers = endpointHandlers(options);
  const endpoints = ENDPOINT_SPECS.flatMap((spec) => {
    const handler = handlers[spec.method] as ((request: unknown) => Promise<AnyReply>) | undefined;
    if (!handler) return [];
    return [
      serveEndpoint({
        nc,
        logger,
        maxRequestBytes,
        subject: topology.serviceSubject(spec.name),
        schema: spec.request as z.ZodType,
        handler,
        observe: observe(spec.name),
        // The guard fails closed whatever failed, a body it could not read included.
        failureFields: (spec as EndpointSpec).failureFields,
        ...((spec as EndpointSpec).everyReplica ? { queue: null } : {}),
      }),
    ];
  });
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
