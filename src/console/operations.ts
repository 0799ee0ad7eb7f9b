import type { DeadLetterPayload, ReplicaStatsPayload } from '../contract/operationsPayloads.js';
import type { ConsoleSession } from './connection.js';
import { byId, h } from './dom.js';
import { showReply } from './replySentence.js';

const DEAD_LETTER_PAGE = 100;
const VERIFY_PAGE = 1000;

/**
 * `#operations`: the worker's consumer lag and ack-pending count, the dead letters (list, show the
 * original payload, retry), reprojecting one task, and the count of drifted tasks from a dry-run
 * verify, and each replica's events by outcome (`replica.stats`, which every replica answers).
 */
export class Operations {
  private readonly root = byId('operations');
  private readonly lag = h('b', { 'data-testid': 'consumer-lag' }, '–');
  private readonly ackPending = h('b', { 'data-testid': 'ack-pending' }, '–');
  private readonly redelivered = h('b', {}, '–');
  private readonly deadLetterCount = h('b', {}, '–');
  private readonly statsNote = h('p', { class: 'muted' });
  private readonly outcomes = h('table', { 'data-testid': 'events-by-outcome' });
  private readonly outcomesNote = h('p', { class: 'muted' });
  private readonly deadLetters = h('div', {});
  private readonly reprojectInput = h('input', { id: 'reproject-task-id', placeholder: 'task id' });
  private readonly reprojectReply = h('div', { 'data-testid': 'reply', hidden: true });
  private readonly driftCount = h('b', { 'data-testid': 'drift-count' }, '–');
  private readonly verifyReply = h('div', { 'data-testid': 'reply', hidden: true });
  private session: ConsoleSession | undefined;

  constructor() {
    const stat = (label: string, value: HTMLElement) => h('div', {}, value, h('span', { class: 'muted' }, label));
    this.root.replaceChildren(
      h(
        'div',
        { class: 'card' },
        h('h3', {}, "The worker's event consumer ", h('button', { type: 'button', onclick: () => void this.refresh('drop') }, 'Refresh')),
        h(
          'div',
          { class: 'stats' },
          stat('events waiting (lag)', this.lag),
          stat('delivered, not yet acknowledged', this.ackPending),
          stat('redelivered', this.redelivered),
          stat('dead letters held', this.deadLetterCount),
        ),
        this.statsNote,
      ),
      h(
        'div',
        { class: 'card' },
        h('h3', {}, 'Events by outcome'),
        h('p', { class: 'muted' }, 'Counted by each replica since it started: a replica that stopped took its counts with it.'),
        this.outcomes,
        this.outcomesNote,
      ),
      h('div', { class: 'card' }, h('h3', {}, 'Dead letters (oldest first)'), this.deadLetters),
      h(
        'div',
        { class: 'card' },
        h('h3', {}, 'Reproject a task'),
        h('p', { class: 'muted' }, 'Rereads the task from the database, compare-and-sets its summary and publishes it if it changed.'),
        this.reprojectInput,
        ' ',
        h('button', { type: 'button', 'data-action': 'reproject', onclick: () => void this.reproject() }, 'Reproject'),
        this.reprojectReply,
      ),
      h(
        'div',
        { class: 'card' },
        h('h3', {}, 'Drift (dry-run verify)'),
        h('p', { class: 'muted' }, 'Tasks whose stored summary differs from a fresh derivation; nothing is written.'),
        h('button', { type: 'button', 'data-action': 'verify', onclick: () => void this.verify() }, 'Verify now'),
        ' drifted tasks: ',
        this.driftCount,
        this.verifyReply,
      ),
    );
  }

  use(session: ConsoleSession): void {
    this.session = session;
  }

  /**
   * Reads the consumer's numbers and the dead letters again. `keep` (the page's own periodic
   * refresh) leaves each record already shown as it is, payload and reply included, and one that left
   * the list (retried) in place, marked; `drop` (Refresh, opening the view) shows the list as it is.
   */
  async refresh(vanished: 'keep' | 'drop'): Promise<void> {
    const session = this.session;
    if (!session) return;
    const [stats, letters, replicas] = await Promise.all([
      session.client.consumerStats({}),
      session.client.listDeadLetters({ limit: DEAD_LETTER_PAGE }),
      session.client.replicaStats({}),
    ]);
    if (replicas.ok) this.showOutcomes(replicas.replicas);
    else this.outcomesNote.textContent = `replica.stats: ${replicas.error.message}`;
    if (stats.ok) {
      this.lag.textContent = String(stats.num_pending);
      this.ackPending.textContent = String(stats.num_ack_pending);
      this.redelivered.textContent = String(stats.num_redelivered);
      this.deadLetterCount.textContent = String(stats.dead_letters);
      this.statsNote.textContent = `consumer ${stats.consumer} on stream ${stats.stream} (${stats.stream_messages} events held) · read ${new Date().toLocaleTimeString()}`;
    } else {
      this.statsNote.textContent = `consumer.stats: ${stats.error.message}`;
    }
    if (!letters.ok) {
      this.deadLetters.replaceChildren(h('p', { class: 'error' }, `dead_letter.list: ${letters.error.message}`));
      return;
    }
    const shown = new Map([...this.deadLetters.querySelectorAll<HTMLElement>('[data-testid=dead-letter]')].map((e) => [e.dataset.seq!, e]));
    const next = letters.dead_letters.map((d) => shown.get(String(d.seq)) ?? this.deadLetter(session, d));
    if (vanished === 'keep') {
      const listed = new Set(letters.dead_letters.map((d) => String(d.seq)));
      for (const [seq, element] of shown) {
        if (listed.has(seq)) continue;
        element.dataset.resolved = 'true';
        next.push(element);
      }
      next.sort((a, b) => Number(a.dataset.seq) - Number(b.dataset.seq));
    }
    this.deadLetters.replaceChildren(...next);
    if (next.length === 0) this.deadLetters.append(h('p', { class: 'muted' }, 'No dead letter.'));
  }

  /** Outcome × replica, and a total column; outcomes in name order. */
  private showOutcomes(replicas: readonly ReplicaStatsPayload[]): void {
    const outcomes = [...new Set(replicas.flatMap((r) => Object.keys(r.events_by_outcome)))].sort();
    const header = h('tr', {}, h('th', {}, 'outcome'), ...replicas.map((r) => h('th', { title: `started ${r.started_at}` }, r.replica)), h('th', {}, 'total'));
    const rows = outcomes.map((outcome) => {
      const counts = replicas.map((r) => r.events_by_outcome[outcome] ?? 0);
      const total = counts.reduce((a, b) => a + b, 0);
      return h(
        'tr',
        { 'data-outcome': outcome },
        h('td', {}, outcome),
        ...counts.map((count) => h('td', {}, count)),
        h('td', { 'data-testid': 'outcome-total' }, h('b', {}, total)),
      );
    });
    this.outcomes.replaceChildren(h('thead', {}, header), h('tbody', {}, ...rows));
    const answered = `${replicas.length} ${replicas.length === 1 ? 'replica' : 'replicas'} answered`;
    this.outcomesNote.textContent = `${outcomes.length === 0 ? 'No event handled yet. ' : ''}${answered} · read ${new Date().toLocaleTimeString()}`;
  }

  private deadLetter(session: ConsoleSession, record: DeadLetterPayload): HTMLElement {
    const reply = h('div', { 'data-testid': 'reply', hidden: true });
    const payload = h('pre', { 'data-testid': 'dead-letter-payload', hidden: true });
    const show = async () => {
      const shown = await session.client.showDeadLetter({ seq: record.seq });
      if (!shown.ok) {
        showReply(reply, shown, 'dead-letter');
        return;
      }
      payload.textContent = shown.original
        ? `${shown.original.subject}\n${shown.original.data}`
        : `The events stream no longer holds the original event. Its start, as recorded:\n${shown.dead_letter.payload_preview}`;
      payload.hidden = false;
    };
    const retry = async () => {
      const retried = await session.client.retryDeadLetter({ seq: record.seq });
      showReply(reply, retried, 'dead-letter');
      if (retried.ok) element.dataset.retried = 'true';
    };
    const element = h(
      'div',
      { 'data-testid': 'dead-letter', 'data-seq': record.seq, class: 'card' },
      h(
        'div',
        {},
        h('b', {}, `#${record.seq} `),
        `${record.subject} · ${record.kind} · ${record.reason}`,
        h('span', { class: 'muted' }, ` · ${record.dead_lettered_at}`),
      ),
      h('div', { class: 'muted' }, record.detail),
      h('p', { class: 'muted resolved-note' }, 'No longer held (retried): Refresh to drop it.'),
      h('button', { type: 'button', 'data-action': 'show', onclick: () => void show() }, 'Show payload'),
      ' ',
      h('button', { type: 'button', 'data-action': 'retry', onclick: () => void retry() }, 'Retry'),
      payload,
      reply,
    );
    return element;
  }

  private async reproject(): Promise<void> {
    const session = this.session;
    const taskId = this.reprojectInput.value.trim();
    if (!session || taskId === '') return;
    showReply(this.reprojectReply, await session.client.reproject({ task_id: taskId }), 'task');
  }

  private async verify(): Promise<void> {
    const session = this.session;
    if (!session) return;
    this.driftCount.textContent = '…';
    let drifted = 0;
    let checked = 0;
    let cursor: string | undefined;
    do {
      const page = await session.client.verifySummaries({ limit: VERIFY_PAGE, ...(cursor ? { cursor } : {}) }, { timeoutMs: 60_000 });
      if (!page.ok) {
        this.driftCount.textContent = '?';
        showReply(this.verifyReply, page, 'other');
        return;
      }
      drifted += page.drifted.length;
      checked += page.checked;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    this.driftCount.textContent = String(drifted);
    showReply(this.verifyReply, { ok: true }, 'other');
    this.verifyReply.textContent = `Checked ${checked} tasks: ${drifted === 0 ? 'no drift.' : `${drifted} drifted (run pending-projector reconcile to repair them).`}`;
  }
}
