import { Kvm } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/nats-core';
import type { KvWatchEntry } from '@nats-io/kv';
import { BoardModel, type BoardFilter } from './boardModel.js';
import { boardTaskOf, boardTaskOfEnvelope, taskIdOfKey, type BoardTask } from './boardTask.js';
import type { ConsoleSession } from './connection.js';
import { byId, h } from './dom.js';
import { visibleRange } from './virtualWindow.js';

const ROW_HEIGHT = 32;
const FLASH_MS = 1000;
const HYDRATION_PAGE = 500;
/**
 * Tasks read through task.list when the page opens (or a workspace is picked): those a person looks
 * at first get their stale pending fields repaired before they are shown. Every page of task.list is
 * a compare-and-set projection of its tasks, so reading all of a large workspace at every page load
 * would be a full reconcile per open tab; past this the board is the bucket's.
 */
const HYDRATION_LIMIT = 2000;
const YIELD_EVERY = 500;

export interface BoardEvents {
  /** A row was clicked. */
  open(taskId: string): void;
  /** A task appeared or its summary changed after the first snapshot (the detail and the questions may be stale). */
  changed(task: BoardTask): void;
}

/**
 * The task board: hydrated with task.list pages (which repair stale pending fields on the way), then
 * kept live from the KV bucket of latest summaries. Only the rows in view are in the DOM.
 */
export class Board {
  private readonly model = new BoardModel();
  private readonly flashUntil = new Map<string, number>();
  private watcher: QueuedIterator<KvWatchEntry> | undefined;
  private generation = 0;
  private renderQueued = false;
  private selected: string | undefined;
  private readonly root = byId('board');
  private readonly scroller = byId('board-scroll');
  private readonly rows = byId('board-rows');
  private readonly workspaceFilter = byId<HTMLSelectElement>('workspace-filter');
  private readonly needsInputFilter = byId<HTMLInputElement>('needs-input-filter');
  private readonly status = byId('board-status');
  private snapshotDone = false;
  private hydrated = 0;
  private hydrationFailure = '';
  /** The latest hydration; an older one (another workspace picked meanwhile) stops at its next page. */
  private hydration = 0;
  private session: ConsoleSession | undefined;

  constructor(private readonly events: BoardEvents) {
    this.scroller.addEventListener('scroll', () => this.scheduleRender(), { passive: true });
    window.addEventListener('resize', () => this.scheduleRender());
    this.workspaceFilter.addEventListener('change', () => {
      this.scroller.scrollTop = 0;
      this.scheduleRender();
      if (this.session) void this.hydrate(this.session, this.generation, this.workspaceFilter.value || undefined);
    });
    this.needsInputFilter.addEventListener('change', () => {
      this.scroller.scrollTop = 0;
      this.scheduleRender();
    });
    const open = (event: Event) => {
      const row = (event.target as HTMLElement).closest<HTMLElement>('[data-testid=task-row]');
      if (!row?.dataset.taskId) return;
      this.selected = row.dataset.taskId;
      this.events.open(row.dataset.taskId);
      this.scheduleRender();
    };
    this.rows.addEventListener('click', open);
    this.rows.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') open(event);
    });
  }

  /** Starts (or restarts, after a reconnect or a sign-in) hydration and the bucket watch on `session`. */
  start(session: ConsoleSession): void {
    this.session = session;
    const generation = ++this.generation;
    this.watcher?.stop();
    this.watcher = undefined;
    this.snapshotDone = false;
    void this.watch(session, generation);
    void this.hydrate(session, generation, this.workspaceFilter.value || undefined);
  }

  /** Marks `taskId`'s row as the one the detail shows (a link may open it without a click). */
  select(taskId: string): void {
    this.selected = taskId;
    this.scheduleRender();
  }

  private filter(): BoardFilter {
    return { workspaceId: this.workspaceFilter.value, needsInput: this.needsInputFilter.checked };
  }

  private async hydrate(session: ConsoleSession, generation: number, workspaceId: string | undefined): Promise<void> {
    const run = ++this.hydration;
    this.hydrated = 0;
    this.hydrationFailure = '';
    let cursor: string | undefined;
    do {
      const reply = await session.client.listTasks({
        limit: HYDRATION_PAGE,
        ...(workspaceId ? { workspace_id: workspaceId } : {}),
        ...(cursor ? { cursor } : {}),
      });
      if (generation !== this.generation || run !== this.hydration) return;
      if (!reply.ok) {
        this.hydrationFailure = `task.list failed (${reply.error.code}): the board shows the bucket only`;
        this.showStatus();
        return;
      }
      for (const entry of reply.tasks) this.apply(boardTaskOf(entry), false);
      this.hydrated += reply.tasks.length;
      cursor = reply.next_cursor ?? undefined;
      this.showStatus();
    } while (cursor && this.hydrated < HYDRATION_LIMIT);
  }

  private async watch(session: ConsoleSession, generation: number): Promise<void> {
    for (let attempt = 0; generation === this.generation; attempt++) {
      try {
        const kv = await new Kvm(session.nc).open(session.config.bucket);
        const { values } = await kv.status();
        if (generation !== this.generation) return;
        // An empty bucket yields nothing, so there is no last snapshot entry to wait for.
        if (values === 0) this.endSnapshot();
        const watcher = await kv.watch();
        this.watcher = watcher;
        let handled = 0;
        for await (const entry of watcher) {
          if (generation !== this.generation) return;
          // nats.js hands a burst of a large snapshot over in one task: give the page a frame now and then.
          if (++handled % YIELD_EVERY === 0) await new Promise((resolve) => setTimeout(resolve, 0));
          if (entry.operation === 'DEL' || entry.operation === 'PURGE') {
            if (this.model.remove(taskIdOfKey(entry.key))) this.scheduleRender();
          } else {
            const task = boardTaskOfEnvelope(entry.value);
            if (task) this.apply(task, this.snapshotDone);
          }
          // The snapshot's last entry may arrive with isUpdate true; delta 0 is what marks it.
          if (!this.snapshotDone && entry.delta === 0) this.endSnapshot();
        }
        return;
      } catch (err) {
        if (generation !== this.generation) return;
        this.status.textContent = `cannot watch bucket ${session.config.bucket}: ${(err as Error).message}; retrying`;
        await new Promise((resolve) => setTimeout(resolve, Math.min(10_000, 1000 * 2 ** attempt)));
      }
    }
  }

  private endSnapshot(): void {
    // User Timing marks (devtools' Performance panel shows them): how long a large bucket takes to load.
    if (!this.snapshotDone) performance.mark('console:bucket-snapshot-loaded', { detail: { tasks: this.model.size } });
    this.snapshotDone = true;
    this.showStatus();
  }

  private apply(task: BoardTask, live: boolean): void {
    const before = this.model.size;
    const known = this.model.workspaces.has(task.workspaceId);
    const { changed, changedExisting } = this.model.upsert(task);
    if (!changed) return;
    if (!known) this.addWorkspaceOption(task.workspaceId);
    if (live && changedExisting) {
      this.flashUntil.set(task.taskId, performance.now() + FLASH_MS);
      setTimeout(() => this.scheduleRender(), FLASH_MS + 50);
    }
    if (live) this.events.changed(task);
    if (this.model.size !== before && this.snapshotDone) this.showStatus();
    this.scheduleRender();
  }

  private addWorkspaceOption(workspaceId: string): void {
    const options = [...this.workspaceFilter.options].slice(1);
    const next = options.find((o) => o.value > workspaceId) ?? null;
    this.workspaceFilter.insertBefore(h('option', { value: workspaceId }, workspaceId), next);
  }

  private showStatus(): void {
    const parts = [`${this.model.size.toLocaleString()} tasks`];
    if (!this.snapshotDone) parts.push('loading the bucket…');
    if (this.hydrated > 0) parts.push(`${this.hydrated.toLocaleString()} read through task.list`);
    if (this.hydrationFailure) parts.push(this.hydrationFailure);
    this.status.textContent = parts.join(' · ');
  }

  private scheduleRender(): void {
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      this.render();
    });
  }

  private render(): void {
    const view = this.model.view(this.filter());
    this.root.dataset.total = String(view.length);
    this.rows.style.height = `${view.length * ROW_HEIGHT}px`;
    const { start, end } = visibleRange(this.scroller.scrollTop, this.scroller.clientHeight, ROW_HEIGHT, view.length);
    const now = performance.now();
    const fragment = document.createDocumentFragment();
    for (let i = start; i < end; i++) fragment.append(this.row(view[i]!, i, now));
    this.rows.replaceChildren(fragment);
    if (end > start && performance.getEntriesByName('console:first-rows').length === 0) performance.mark('console:first-rows');
    if (!this.snapshotDone) return;
    for (const [taskId, until] of this.flashUntil) if (until <= now) this.flashUntil.delete(taskId);
  }

  private row(task: BoardTask, index: number, now: number): HTMLElement {
    const flashing = (this.flashUntil.get(task.taskId) ?? 0) > now;
    return h(
      'div',
      {
        'data-testid': 'task-row',
        'data-task-id': task.taskId,
        'data-pending': task.pending,
        'aria-selected': task.taskId === this.selected ? 'true' : 'false',
        class: flashing ? 'flash' : null,
        style: `transform: translateY(${index * ROW_HEIGHT}px)`,
        title: `workspace ${task.workspaceId}`,
        tabindex: 0,
      },
      h('span', { class: 'task-id' }, task.taskId),
      h('span', { 'data-testid': 'pending-badge' }, task.pending),
      h('span', {}, task.queued || ''),
      h('span', { 'data-testid': 'revision' }, task.revision),
      h('span', { 'data-testid': 'updated-at' }, task.updatedAt),
    );
  }
}
