import type { BoardTask } from './boardTask.js';

export interface BoardFilter {
  /** '' for every workspace. */
  workspaceId: string;
  needsInput: boolean;
}

/** Two ascending lists as one, in one pass. */
function mergeSorted(a: readonly string[], b: readonly string[]): string[] {
  const merged = new Array<string>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) merged[k++] = a[i]! <= b[j]! ? a[i++]! : b[j++]!;
  while (i < a.length) merged[k++] = a[i++]!;
  while (j < b.length) merged[k++] = b[j++]!;
  return merged;
}

/**
 * The tasks the board knows, newest revision each, in task id order. Built for 100,000 tasks and a
 * stream of updates: an update is a map write; tasks new since the last view are sorted alone and
 * merged in (a bucket snapshot arriving over many frames never sorts the whole list again); a
 * filtered view is one pass, cached until the next change.
 */
export class BoardModel {
  private readonly tasks = new Map<string, BoardTask>();
  private ids: string[] = [];
  /** Tasks that arrived since the last view, merged into `ids` by the next one. */
  private arrived: string[] = [];
  private cached: { key: string; version: number; rows: BoardTask[] } | undefined;
  private version = 0;
  readonly workspaces = new Set<string>();

  get size(): number {
    return this.tasks.size;
  }

  get(taskId: string): BoardTask | undefined {
    return this.tasks.get(taskId);
  }

  /**
   * Keeps `task` unless an equal or newer revision is held (the bucket and task.list may deliver
   * one summary twice, or out of order). Returns true when the board changed, and `changedExisting`
   * when it changed a task that was already shown (what flashes).
   */
  upsert(task: BoardTask): { changed: boolean; changedExisting: boolean } {
    const held = this.tasks.get(task.taskId);
    if (held && held.revision >= task.revision) return { changed: false, changedExisting: false };
    this.tasks.set(task.taskId, task);
    this.workspaces.add(task.workspaceId);
    if (!held) this.arrived.push(task.taskId);
    this.version++;
    return { changed: true, changedExisting: held !== undefined };
  }

  remove(taskId: string): boolean {
    if (!this.tasks.delete(taskId)) return false;
    this.ids = this.ids.filter((id) => id !== taskId);
    this.arrived = this.arrived.filter((id) => id !== taskId);
    this.version++;
    return true;
  }

  clear(): void {
    this.tasks.clear();
    this.ids = [];
    this.arrived = [];
    this.workspaces.clear();
    this.version++;
  }

  /** The tasks `filter` keeps, in task id order. */
  view(filter: BoardFilter): readonly BoardTask[] {
    const key = `${filter.workspaceId}\u0000${filter.needsInput}`;
    if (this.cached && this.cached.key === key && this.cached.version === this.version) return this.cached.rows;
    if (this.arrived.length > 0) {
      this.ids = mergeSorted(this.ids, this.arrived.sort());
      this.arrived = [];
    }
    const rows: BoardTask[] = [];
    for (const id of this.ids) {
      const task = this.tasks.get(id)!;
      if (filter.workspaceId !== '' && task.workspaceId !== filter.workspaceId) continue;
      if (filter.needsInput && task.pending === '') continue;
      rows.push(task);
    }
    this.cached = { key, version: this.version, rows };
    return rows;
  }
}
