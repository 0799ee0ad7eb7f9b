import type { PendingBundle } from '../client/index.js';
import type { ConsoleSession } from './connection.js';
import { byId, h } from './dom.js';
import { questionView } from './questionView.js';
import { showReply } from './replySentence.js';

const PAGE = 50;

/**
 * `#questions`: the unresolved clarification bundles, a page at a time, each answerable with its
 * options and custom text or rejectable, through clarification.respond. A refresh keeps the bundles
 * already shown (and what was typed into them) and adds or drops only the ones that changed.
 */
export class Questions {
  private readonly root = byId('questions');
  private readonly list = h('div', {});
  private readonly pager = h('div', { class: 'toolbar' });
  private readonly status = h('span', { class: 'muted' });
  private session: ConsoleSession | undefined;
  /** Cursors of the pages before this one (the first page's is undefined). */
  private cursors: Array<string | undefined> = [undefined];
  private refreshing: Promise<void> | undefined;
  private again: 'keep' | 'drop' | undefined;

  constructor() {
    this.root.replaceChildren(
      h(
        'div',
        { class: 'toolbar' },
        h('h2', {}, 'Questions waiting for an answer'),
        h('button', { type: 'button', onclick: () => void this.refresh('drop') }, 'Refresh'),
        this.status,
      ),
      this.list,
      this.pager,
    );
  }

  use(session: ConsoleSession): void {
    this.session = session;
    this.cursors = [undefined];
    void this.refresh('drop');
  }

  /**
   * Reads the current page again; calls during a read are folded into one more read after it.
   * `keep` (a refresh the page makes by itself, on a task's change) leaves a bundle that left the
   * listing in place, marked resolved, so nothing vanishes under a person's pointer or half-typed
   * answer; `drop` (the Refresh button, opening the view) removes it.
   */
  refresh(vanished: 'keep' | 'drop'): Promise<void> {
    if (this.refreshing) {
      this.again = this.again === 'drop' || vanished === 'drop' ? 'drop' : 'keep';
      return this.refreshing;
    }
    this.refreshing = this.load(vanished).finally(() => {
      this.refreshing = undefined;
      const again = this.again;
      this.again = undefined;
      if (again) void this.refresh(again);
    });
    return this.refreshing;
  }

  private async load(vanished: 'keep' | 'drop'): Promise<void> {
    const session = this.session;
    if (!session) return;
    const cursor = this.cursors[this.cursors.length - 1];
    const reply = await session.client.listPending({ limit: PAGE, ...(cursor ? { cursor } : {}) });
    if (!reply.ok) {
      this.status.textContent = `clarification.list_pending: ${reply.error.message}`;
      return;
    }
    this.status.textContent = `${reply.bundles.length} on this page`;
    const shown = new Map([...this.list.querySelectorAll<HTMLElement>('[data-testid=question-bundle]')].map((e) => [e.dataset.bundleId!, e]));
    const next = reply.bundles.map((b) => shown.get(b.pending_id) ?? this.bundle(session, b));
    if (vanished === 'keep') {
      const listed = new Set(reply.bundles.map((b) => b.pending_id));
      for (const [id, element] of shown) {
        if (listed.has(id)) continue;
        element.dataset.resolved = 'true';
        next.push(element);
      }
    }
    this.list.replaceChildren(...next);
    if (next.length === 0) this.list.append(h('p', { class: 'muted' }, 'No question waits.'));
    this.pager.replaceChildren(
      h('button', { type: 'button', disabled: this.cursors.length === 1, onclick: () => this.page(-1, undefined) }, '← Previous'),
      h('button', { type: 'button', disabled: reply.next_cursor === null, onclick: () => this.page(1, reply.next_cursor ?? undefined) }, 'Next →'),
    );
  }

  private page(step: -1 | 1, cursor: string | undefined): void {
    if (step === 1) this.cursors.push(cursor);
    else if (this.cursors.length > 1) this.cursors.pop();
    this.list.replaceChildren();
    void this.refresh('drop');
  }

  private bundle(session: ConsoleSession, bundle: PendingBundle): HTMLElement {
    const reply = h('div', { 'data-testid': 'reply', hidden: true });
    const questions = bundle.questions.map((q, index) => {
      const view = questionView(q.question);
      const group = `${bundle.pending_id}:${index}`;
      const element = h(
        'fieldset',
        { class: 'question', 'data-question-id': q.question_id },
        h('legend', {}, view.prompt),
        ...view.options.map((o) =>
          h('label', {}, h('input', { type: view.multiple ? 'checkbox' : 'radio', name: group, 'data-option-id': o.id, value: o.id }), ` ${o.label}`),
        ),
        h('textarea', { name: 'custom', placeholder: 'Your own answer (optional)', maxlength: 2000 }),
        q.agent_disconnected ? h('p', { class: 'muted' }, 'The agent is disconnected: an answer resumes it.') : null,
      );
      return { id: q.question_id, element };
    });
    const buttons = h('div', {});
    const respond = async (body: Parameters<ConsoleSession['client']['respond']>[0]) => {
      for (const button of buttons.querySelectorAll('button')) button.disabled = true;
      const result = await session.client.respond(body);
      showReply(reply, result, 'question');
      if (!result.ok) for (const button of buttons.querySelectorAll('button')) button.disabled = false;
    };
    const answer = () =>
      respond({
        pending_id: bundle.pending_id,
        answers: questions.map(({ id, element: q }) => ({
          question_id: id,
          selected_options: [...q.querySelectorAll<HTMLInputElement>('input[data-option-id]:checked')].map((i) => i.dataset.optionId!),
          custom_text: q.querySelector('textarea')!.value,
        })),
      });
    const reject = () => respond({ pending_id: bundle.pending_id, reject: { reason: 'rejected from the pending-projector console' } });
    buttons.append(
      h('button', { type: 'button', 'data-action': 'answer', onclick: () => void answer() }, 'Answer'),
      ' ',
      h('button', { type: 'button', 'data-action': 'reject', onclick: () => void reject() }, 'Reject'),
    );
    const element = h(
      'div',
      { class: 'card', 'data-testid': 'question-bundle', 'data-bundle-id': bundle.pending_id, 'data-task-id': bundle.task_id },
      h('h3', {}, `Task ${bundle.task_id}`),
      h('p', { class: 'muted' }, `session ${bundle.session_id} · turn ${bundle.turn_id} · asked ${bundle.created_at}`),
      bundle.context ? h('p', {}, bundle.context) : null,
      h('p', { class: 'muted resolved-note' }, 'No longer waiting (answered, rejected or expired): Refresh to drop it.'),
      ...questions.map((q) => q.element),
      buttons,
      reply,
    );
    return element;
  }
}
