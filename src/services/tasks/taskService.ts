import type { Logger } from 'pino';
import { parseStoredSummary, toPublishedSummary } from '../../events/statusSummary.js';
import type { TaskStore } from '../../repository/tasks/taskStore.js';
import type { RefreshSummary } from '../clarifications/clarificationPorts.js';
import { failure, type ReprojectReply, type SummaryReply, type TaskListReply } from '../../contract/replies.js';
import type { TaskListRequest, TaskRequest } from '../../contract/requests.js';
import { decodeTaskIdCursor, encodeTaskIdCursor } from '../taskIdCursor.js';

export interface TaskServiceDeps {
  store: TaskStore;
  /** One synchronous projection of the task (the worker wires `projector.reproject`). */
  reproject: RefreshSummary;
  /** One projection of many tasks (the worker wires `projector.reprojectBatch`); resolves to the ids that failed. */
  repair: (taskIds: readonly string[]) => Promise<string[]>;
  logger: Logger;
}

/**
 * `summary.get`, `task.reproject` and `task.list`. Every expected outcome is a reply value; a store that cannot
 * answer rejects, and the endpoint replies to it as to any thrown failure (thrownFailureReply).
 */
export interface TaskService {
  /** The stored summary, read from the database (the source of truth; the KV bucket is a copy). */
  getSummary(request: TaskRequest): Promise<SummaryReply>;
  /** Runs one projection of the task; rejects when it did not commit (e.g. compare-and-set exhausted). */
  reproject(request: TaskRequest): Promise<ReprojectReply>;
  /**
   * A page of tasks with their summaries. Like Kandev's task-list read (ADR 0001: "existing task
   * summaries reconcile their pending field on normal task-list and boot reads"), the page's tasks
   * are projected first, by the same compare-and-set, so a stale `pending_action` is repaired and
   * its replacement published before the reply shows it.
   */
  listTasks(request: TaskListRequest): Promise<TaskListReply>;
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

    async listTasks({ workspace_id: workspaceId, cursor, limit }) {
      const afterId = cursor === undefined ? undefined : decodeTaskIdCursor(cursor);
      if (cursor !== undefined && afterId === undefined) return failure('bad_request', 'cursor is not one this service issued');
      const page = await store.listTasks({ workspaceId, afterId, limit: limit + 1 });
      const listed = page.slice(0, limit);
      const ids = listed.map((t) => t.id);
      const failed = await deps.repair(ids);
      // A task whose repair did not commit is listed as stored: the reply stays a bounded read.
      if (failed.length > 0) deps.logger.warn({ tasks: failed }, 'task.list: some summaries could not be repaired on this read');
      const summaries = await store.loadStatusSummaries(ids);
      return {
        ok: true,
        tasks: listed.map((task) => {
          const stored = summaries.get(task.id);
          return {
            task_id: task.id,
            workspace_id: task.workspaceId,
            status_summary: stored ? toPublishedSummary(parseStoredSummary(stored.summary), stored.revision, stored.updatedAt) : null,
          };
        }),
        next_cursor: page.length > limit ? encodeTaskIdCursor(listed[listed.length - 1]!.id) : null,
      };
    },

    async reproject({ task_id: taskId }) {
      if (!(await store.getTask(taskId))) return unknownTask(taskId);
      await deps.reproject(taskId);
      return { ok: true, task_id: taskId };
    },
  };
}
