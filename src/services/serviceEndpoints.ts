import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Topology } from '../events/subjects.js';
import type { ClarificationService } from './clarificationService.js';
import { serveEndpoint, type AnyReply } from './endpoint.js';
import { ENDPOINTS, listPendingRequestSchema, respondRequestSchema, sessionRequestSchema, taskRequestSchema } from './requests.js';
import type { TaskService } from './taskService.js';

export interface ServiceEndpointsOptions {
  nc: NatsConnection;
  topology: Topology;
  clarifications: ClarificationService;
  tasks: TaskService;
  logger: Logger;
  maxRequestBytes: number;
}

/**
 * The worker's request/reply endpoints under `<prefix>pending_projector.v1.` (docs/endpoints.md).
 * Each one validates its body and sends its service's reply value as it is.
 */
export async function startServiceEndpoints(options: ServiceEndpointsOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, topology, logger, maxRequestBytes, clarifications, tasks } = options;
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
  ];
  await nc.flush();
  return {
    async stop() {
      await Promise.all(endpoints.map((e) => e.stop()));
    },
  };
}
