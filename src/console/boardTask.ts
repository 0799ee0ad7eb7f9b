import { isPendingAction } from '../turns/index.js';

/** A task as the board shows it: the fields of its latest summary the rows and filters read. */
export interface BoardTask {
  taskId: string;
  workspaceId: string;
  /** `clarification`, `permission`, or '' for none. */
  pending: string;
  /** Prompts waiting in the task's session queues. */
  queued: number;
  /** 0 for a task listed without a summary yet. */
  revision: number;
  updatedAt: string;
}

/** A summary as task.list, summary.get and the bucket's envelopes carry it. */
export interface SummaryData {
  task_id: string;
  workspace_id: string;
  status_summary: { revision: number; updated_at: string; pending_action?: unknown; queued_prompt_count?: unknown } | null;
}

export function boardTaskOf(data: SummaryData): BoardTask {
  const summary = data.status_summary;
  return {
    taskId: data.task_id,
    workspaceId: data.workspace_id,
    pending: isPendingAction(summary?.pending_action) ? summary.pending_action : '',
    queued: typeof summary?.queued_prompt_count === 'number' ? summary.queued_prompt_count : 0,
    revision: summary?.revision ?? 0,
    updatedAt: summary?.updated_at ?? '',
  };
}

/** A KV entry's value: the summary envelope the worker puts (`data` is a SummaryData); undefined when it is not one. */
export function boardTaskOfEnvelope(value: Uint8Array | string): BoardTask | undefined {
  try {
    const envelope = JSON.parse(typeof value === 'string' ? value : new TextDecoder().decode(value)) as { data?: Partial<SummaryData> };
    const data = envelope.data;
    if (!data || typeof data.task_id !== 'string' || typeof data.workspace_id !== 'string') return undefined;
    if (data.status_summary !== null && typeof data.status_summary?.revision !== 'number') return undefined;
    return boardTaskOf(data as SummaryData);
  } catch {
    return undefined;
  }
}

/**
 * The task id of a bucket key (the inverse of the worker's key rule: ids outside `[-_=A-Za-z0-9]`
 * are stored as `b64.<base64url>`), for a delete, which carries no envelope to read it from.
 */
export function taskIdOfKey(key: string): string {
  if (!key.startsWith('b64.')) return key;
  const base64 = key.slice(4).replace(/-/g, '+').replace(/_/g, '/');
  const bytes = Uint8Array.from(atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, '=')), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}
