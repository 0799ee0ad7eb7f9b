import type { RepositoryContext } from '../context.js';
import type { TaskRecord } from '../rowMapping.js';
import { loadStatusSummaries, type StoredStatusSummary } from '../projection/statusSummaries.js';
import { getTask } from './tasks.js';

/** The reads behind `summary.get` and `task.reproject` (src/services/tasks/taskService.ts). */
export interface TaskStore {
  getTask(taskId: string): Promise<TaskRecord | undefined>;
  /** The task's stored summary row (the source of truth; the KV bucket is a copy), if it has one yet. */
  loadStatusSummary(taskId: string): Promise<StoredStatusSummary | undefined>;
}

export function createTaskStore(ctx: RepositoryContext): TaskStore {
  return {
    getTask: (taskId) => getTask(ctx, taskId),
    loadStatusSummary: async (taskId) => (await loadStatusSummaries(ctx, [taskId])).get(taskId),
  };
}
