import type { QueueEntryPayload } from '../client/index.js';
import type { ConsoleSession } from './connection.js';
import { h } from './dom.js';
import { showReply, type ReplyLike } from './replySentence.js';

/** `ids` with the entry at `index` moved by `step` (-1 up, +1 down); the same order when it cannot move. */
export function movedOrder(ids: readonly string[], index: number, step: -1 | 1): string[] {
  const order = [...ids];
  const target = index + step;
  if (index < 0 || index >= order.length || target < 0 || target >= order.length) return order;
  [order[index], order[target]] = [order[target]!, order[index]!];
  return order;
}

/**
 * One session's queue of waiting prompts with remove, move up/down, pause/resume and drain, each
 * through its endpoint; after every action the queue is read again and the reply shown in words.
 */
export interface QueueView {
  element: HTMLElement;
  /** Reads the queue again, keeping the last action's reply on show. */
  refresh(): Promise<void>;
}

export function queueView(session: ConsoleSession, sessionId: string): QueueView {
  const container = h('div', { 'data-testid': 'queue', 'data-paused': 'false', class: 'queue' }, h('span', { class: 'muted' }, 'Loading the queue…'));
  const reply = h('div', { 'data-testid': 'reply', hidden: true });
  const { client } = session;

  const act = async (call: () => Promise<ReplyLike>) => {
    const result = await call();
    await load();
    showReply(reply, result, 'queue');
  };

  const load = async () => {
    const listed = await client.listQueue({ session_id: sessionId });
    if (!listed.ok) {
      container.replaceChildren(h('span', { class: 'error' }, `queue.list: ${listed.error.message}`), reply);
      return;
    }
    const ids = listed.entries.map((e) => e.id);
    container.dataset.paused = String(!listed.auto_run);
    const entry = (e: QueueEntryPayload, index: number) =>
      h(
        'div',
        { 'data-testid': 'queue-entry', 'data-queue-id': e.id },
        h('span', { class: 'content', title: e.content }, e.content),
        h(
          'button',
          { type: 'button', 'data-action': 'move-up', disabled: index === 0, onclick: () => void act(() => reorder(movedOrder(ids, index, -1))) },
          '↑',
        ),
        h(
          'button',
          { type: 'button', 'data-action': 'move-down', disabled: index === ids.length - 1, onclick: () => void act(() => reorder(movedOrder(ids, index, 1))) },
          '↓',
        ),
        h(
          'button',
          { type: 'button', 'data-action': 'remove', onclick: () => void act(() => client.removeQueueEntry({ session_id: sessionId, queue_id: e.id })) },
          'Remove',
        ),
      );
    const reorder = (queueIds: string[]) => client.reorderQueue({ session_id: sessionId, queue_ids: queueIds, revision: listed.revision });
    const toggle = listed.auto_run
      ? h(
          'button',
          { type: 'button', 'data-action': 'pause', onclick: () => void act(() => client.setQueueAutoRun({ session_id: sessionId, auto_run: false })) },
          'Pause',
        )
      : h(
          'button',
          { type: 'button', 'data-action': 'resume', onclick: () => void act(() => client.setQueueAutoRun({ session_id: sessionId, auto_run: true })) },
          'Resume',
        );
    container.replaceChildren(
      h(
        'h4',
        {},
        `Queue: ${listed.count} of ${listed.max} waiting${listed.auto_run ? '' : ' (paused)'} `,
        toggle,
        ' ',
        h(
          'button',
          { type: 'button', 'data-action': 'drain', onclick: () => void act(() => client.drainQueue({ session_id: sessionId })) },
          'Send the head now',
        ),
      ),
      ...listed.entries.map(entry),
      listed.entries.length === 0 ? h('div', { class: 'muted' }, 'No prompt waits.') : '',
      reply,
    );
  };

  void load();
  return { element: container, refresh: load };
}
