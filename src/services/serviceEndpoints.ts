import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { parseStoredSummary, toPublishedSummary } from '../events/statusSummary.js';
import type { Topology } from '../events/subjects.js';
import type { Projector } from '../projectors/projector.js';
import type { RepositoryContext } from '../repository/context.js';
import { loadStatusSummaries } from '../repository/statusSummaries.js';
import { getTask } from '../repository/tasks.js';
import type { ClarificationService } from './clarificationService.js';
import { ReplyError, serveEndpoint, type Reply } from './endpoint.js';
import { ENDPOINTS, listPendingRequestSchema, respondRequestSchema, sessionRequestSchema, taskRequestSchema } from './requests.js';

export interface ServiceEndpointsOptions {
  nc: NatsConnection;
  topology: Topology;
  ctx: RepositoryContext;
  projector: Projector;
  clarifications: ClarificationService;
  logger: Logger;
  maxRequestBytes: number;
}

/** A service reply value as an endpoint result: the payload, or a ReplyError carrying any extra fields. */
async function unwrap<T extends object>(reply: Promise<Reply<T> | (Reply<T> & Record<string, unknown>)>): Promise<T> {
  const value = await reply;
  if (value.ok) {
    const { ok: _ok, ...payload } = value;
    return payload as unknown as T;
  }
  const { ok: _ok, error, ...details } = value as { ok: false; error: { code: ReplyError['code']; message: string } } & Record<string, unknown>;
  throw new ReplyError(error.code, error.message, Object.keys(details).length > 0 ? details : undefined);
}

/** The worker's request/reply endpoints under `<prefix>pending_projector.v1.` (docs/endpoints.md). */
export async function startServiceEndpoints(options: ServiceEndpointsOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, topology, ctx, logger, maxRequestBytes, clarifications } = options;
  const serve = <S extends z.ZodType, R extends object>(name: string, schema: S, handler: (request: z.output<S>) => Promise<R>) =>
    serveEndpoint({ nc, logger, maxRequestBytes, subject: topology.serviceSubject(name), schema, handler });
  const endpoints = [
    // The database is the source of truth; the KV bucket is a convenience copy.
    serve(ENDPOINTS.summaryGet, taskRequestSchema, async ({ task_id }) => {
      const stored = (await loadStatusSummaries(ctx, [task_id])).get(task_id);
      if (!stored) {
        if (!(await getTask(ctx, task_id))) throw new ReplyError('not_found', `task ${task_id} does not exist`);
        throw new ReplyError('not_found', `task ${task_id} has no summary yet`);
      }
      return {
        task_id,
        workspace_id: stored.workspaceId,
        status_summary: toPublishedSummary(parseStoredSummary(stored.summary), stored.revision, stored.updatedAt),
      };
    }),
    serve(ENDPOINTS.taskReproject, taskRequestSchema, async ({ task_id }) => {
      if (!(await getTask(ctx, task_id))) throw new ReplyError('not_found', `task ${task_id} does not exist`);
      await options.projector.reproject(task_id);
      return { task_id };
    }),
    serve(ENDPOINTS.clarificationRespond, respondRequestSchema, (request) => unwrap(clarifications.respond(request))),
    serve(ENDPOINTS.clarificationListPending, listPendingRequestSchema, (request) => unwrap(clarifications.listPending(request))),
    serve(ENDPOINTS.clarificationDetach, sessionRequestSchema, (request) => unwrap(clarifications.detach(request))),
    serve(ENDPOINTS.clarificationExpire, sessionRequestSchema, (request) => unwrap(clarifications.expire(request))),
    serve(ENDPOINTS.sessionGuard, sessionRequestSchema, (request) => unwrap(clarifications.guard(request))),
    serve(ENDPOINTS.sessionTurns, sessionRequestSchema, (request) => unwrap(clarifications.turns(request))),
    serve(ENDPOINTS.taskPendingActions, taskRequestSchema, (request) => unwrap(clarifications.pendingActions(request))),
  ];
  await nc.flush();
  return {
    async stop() {
      await Promise.all(endpoints.map((e) => e.stop()));
    },
  };
}
