import type { Logger } from 'pino';
import { parseStoredSummary, toPublishedSummary } from '../../events/statusSummary.js';
import type { TaskStore } from '../../repository/tasks/taskStore.js';
import type { RefreshSummary } from '../clarifications/clarificationPorts.js';
import { failure, type ReprojectReply, type SummaryReply } from '../../contract/replies.js';
import type { TaskRequest } from '../../contract/requests.js';

export interface TaskServiceDeps {
  store: TaskStore;
  /** One synchronous projection of the task (the worker wires `projector.reproject`). */
  reproject: RefreshSummary;
  logger: Logger;
}

/**
 * `summary.get` and `task.reproject`. Every expected outcome is a reply value; a store that cannot
 * answer rejects, and the endpoint replies to it as to any thrown failure (thrownFailureReply).
 */
export interface TaskService {
  /** The stored summary, read from the database (the source of truth; the KV bucket is a copy). */
  getSummary(request: TaskRequest): Promise<SummaryReply>;
  /** Runs one projection of the task; rejects when it did not commit (e.g. compare-and-set exhausted). */
  reproject(request: TaskRequest): Promise<ReprojectReply>;
}

const unknownTask = (taskId: string) => failure('not_found', `task ${taskId} does not exist`);

export function createTaskService(deps: TaskServiceDeps): TaskService {
  const { store } = deps;
  return {
    async getSummary({ task_id: taskId }) {
      const stored = await store.loadStatusSummary(taskId);
      if (!stored) {
        if (!(await store.getTask(taskId))) return unknownTask(taskId);
        return failure('not_found', `task ${taskId} has no summary yet`);
      }
      return {
        ok: true,
        task_id: taskId,
        workspace_id: stored.workspaceId,
        status_summary: toPublishedSummary(parseStoredSummary(stored.summary), stored.revision, stored.updatedAt),
      };
    },

    async reproject({ task_id: taskId }) {
      if (!(await store.getTask(taskId))) return unknownTask(taskId);
      await deps.reproject(taskId);
      return { ok: true, task_id: taskId };
    },
  };
}
