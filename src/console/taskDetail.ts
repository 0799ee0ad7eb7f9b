import { isLifecycleTurn, sessionToOpen, type SessionPendingActionPayload, type TurnPayload } from '../client/index.js';
import type { ConsoleSession } from './connection.js';
import { checkCurrentTurn } from './currentTurnCheck.js';
import { byId, h } from './dom.js';
import { queueView, type QueueView } from './queueView.js';

// The session a person last opened per task, for this tab: sessionToOpen prefers it when no question waits.
const REMEMBERED_KEY = 'pending-projector-console.opened-session.';

function remembered(taskId: string): string | null {
  return sessionStorage.getItem(REMEMBERED_KEY + taskId);
}

/**
 * `#task-detail`: the task's sessions with their pending actions, each session's visible turns with
 * the current turn resolved in the browser beside the server's, and its queue. The session
 * sessionToOpen chooses is opened (marked and scrolled to).
 */
export class TaskDetail {
  private readonly root = byId('task-detail');
  private taskId: string | undefined;
  /**
   * The open task's queue views by session, kept across the reloads a summary change causes, so a
   * queue action's reply stays on show while the detail around it is read again.
   */
  private queues = new Map<string, QueueView>();
  private loading = 0;

  constructor(private session: ConsoleSession | undefined) {}

  use(session: ConsoleSession): void {
    this.session = session;
    // The views call through the session they were made with: a new connection makes new ones.
    this.queues = new Map();
    if (this.taskId) void this.open(this.taskId);
  }

  get openTaskId(): string | undefined {
    return this.taskId;
  }

  async open(taskId: string): Promise<void> {
    if (taskId !== this.taskId) this.queues = new Map();
    this.taskId = taskId;
    const session = this.session;
    if (!session) return;
    const load = ++this.loading;
    this.root.hidden = false;
    this.root.dataset.taskId = taskId;
    const reply = await session.client.pendingActions({ task_id: taskId });
    if (load !== this.loading) return;
    if (!reply.ok) {
      this.root.replaceChildren(h('h2', {}, `Task ${taskId}`), h('p', { class: 'error' }, `task.pending_actions: ${reply.error.message}`));
      return;
    }
    const opened = sessionToOpen(reply.pending_action, reply.sessions, remembered(taskId));
    const sessions = await Promise.all(reply.sessions.map((s) => this.sessionCard(session, taskId, s, s.session_id === opened)));
    if (load !== this.loading) return;
    this.root.replaceChildren(
      h('h2', {}, `Task ${taskId}`),
      h(
        'p',
        { class: 'muted' },
        `workspace ${reply.workspace_id} · pending: ${reply.pending_action ?? 'none'} · ${reply.sessions.length} session(s), oldest first`,
      ),
      ...sessions,
      reply.sessions.length === 0 ? h('p', { class: 'muted' }, 'This task has no session.') : '',
    );
    this.root.querySelector('[data-opened=true]')?.scrollIntoView({ block: 'nearest' });
  }

  private async sessionCard(session: ConsoleSession, taskId: string, s: SessionPendingActionPayload, opened: boolean): Promise<HTMLElement> {
    const turns = await session.client.turns({ session_id: s.session_id });
    const card = h(
      'div',
      {
        class: 'card',
        'data-testid': 'session',
        'data-session-id': s.session_id,
        'data-pending': s.pending_action ?? '',
        'data-opened': opened ? 'true' : null,
      },
      h(
        'h3',
        {},
        `Session ${s.session_id} `,
        h('span', { class: 'muted' }, `${s.state}${s.is_primary ? ' · primary' : ''} · pending: ${s.pending_action ?? 'none'}${opened ? ' · opened' : ''}`),
        ' ',
        opened ? null : h('button', { type: 'button', onclick: () => this.remember(taskId, s.session_id) }, 'Open'),
      ),
    );
    if (!turns.ok) {
      card.append(h('p', { class: 'error' }, `session.turns: ${turns.error.message}`));
    } else {
      card.append(this.turnList(turns.turns, turns.current_turn_id));
    }
    let queue = this.queues.get(s.session_id);
    if (queue) void queue.refresh();
    else this.queues.set(s.session_id, (queue = queueView(session, s.session_id)));
    card.append(queue.element);
    return card;
  }

  private turnList(turns: TurnPayload[], serverCurrent: string | null): HTMLElement {
    const check = checkCurrentTurn(turns, serverCurrent);
    return h(
      'div',
      { class: 'turns' },
      h('h4', {}, `Turns (${turns.length} visible, oldest first) · current: ${check.browser ?? 'none'}`),
      check.agree
        ? null
        : h(
            'p',
            { 'data-testid': 'current-turn-error', class: 'error' },
            `The browser resolves the current turn to ${check.browser ?? 'none'}, the server says ${check.server ?? 'none'}: they must agree.`,
          ),
      ...turns.map((t) => {
        const lifecycle = isLifecycleTurn(t);
        return h(
          'div',
          { 'data-testid': 'turn', 'data-turn-id': t.id, 'data-lifecycle': lifecycle ? 'true' : null, 'data-current': t.id === check.browser ? 'true' : null },
          h('span', {}, t.id),
          h('span', {}, `started ${t.started_at}`),
          h('span', {}, t.completed_at ? `completed ${t.completed_at}` : 'open'),
          lifecycle ? h('span', {}, 'lifecycle') : null,
        );
      }),
    );
  }

  private remember(taskId: string, sessionId: string): void {
    sessionStorage.setItem(REMEMBERED_KEY + taskId, sessionId);
    void this.open(taskId);
  }
}
