import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { z } from 'zod';
import { parseStoredSummary, toPublishedSummary } from '../events/statusSummary.js';
import type { Topology } from '../events/subjects.js';
import type { Projector } from '../projectors/projector.js';
import type { RepositoryContext } from '../repository/context.js';
import { loadStatusSummaries } from '../repository/statusSummaries.js';
import { getTask } from '../repository/tasks.js';
import { ReplyError, serveEndpoint } from './endpoint.js';

export interface ServiceEndpointsOptions {
  nc: NatsConnection;
  topology: Topology;
  ctx: RepositoryContext;
  projector: Projector;
  logger: Logger;
  maxRequestBytes: number;
}

const taskRequest = z.object({ task_id: z.string().min(1).max(256) });

/** The worker's request/reply endpoints under `<prefix>pending_projector.v1.`. */
export async function startServiceEndpoints(options: ServiceEndpointsOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, topology, ctx, logger, maxRequestBytes } = options;
  const endpoints = [
    serveEndpoint({
      nc,
      logger,
      maxRequestBytes,
      subject: topology.serviceSubject('summary.get'),
      schema: taskRequest,
      // The database is the source of truth; the KV bucket is a convenience copy.
      handler: async ({ task_id }) => {
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
      },
    }),
    serveEndpoint({
      nc,
      logger,
      maxRequestBytes,
      subject: topology.serviceSubject('task.reproject'),
      schema: taskRequest,
      handler: async ({ task_id }) => {
        if (!(await getTask(ctx, task_id))) throw new ReplyError('not_found', `task ${task_id} does not exist`);
        await options.projector.reproject(task_id);
        return { task_id };
      },
    }),
  ];
  await nc.flush();
  return {
    async stop() {
      await Promise.all(endpoints.map((e) => e.stop()));
    },
  };
}
