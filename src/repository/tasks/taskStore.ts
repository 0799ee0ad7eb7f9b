import type { RepositoryContext } from '../context.js';
import type { TaskRecord } from '../rowMapping.js';
import { loadStatusSummaries, type StoredStatusSummary } from '../projection/statusSummaries.js';
import { getTask, listTasksPage } from './tasks.js';

/** The reads behind `summary.get`, `task.reproject` and `task.list` (src/services/tasks/taskService.ts). */
export interface TaskStore {
  getTask(taskId: string): Promise<TaskRecord | undefined>;
  /** The task's stored summary row (the source of truth; the KV bucket is a copy), if it has one yet. */
  loadStatusSummary(taskId: string): Promise<StoredStatusSummary | undefined>;
  /** Tasks not archived, in id order, after `afterId`. */
  listTasks(options: { workspaceId?: string; afterId?: string; limit: number }): Promise<Array<{ id: string; workspaceId: string }>>;
  loadStatusSummaries(taskIds: readonly string[]): Promise<Map<string, StoredStatusSummary>>;
}

export function createTaskStore(ctx: RepositoryContext): TaskStore {
  return {
    getTask: (taskId) => getTask(ctx, taskId),
    loadStatusSummary: async (taskId) => (await loadStatusSummaries(ctx, [taskId])).get(taskId),
    listTasks: (options) => listTasksPage(ctx, options),
    loadStatusSummaries: (taskIds) => loadStatusSummaries(ctx, taskIds),
  };
}
