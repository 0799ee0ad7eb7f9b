import { describe, expect, it } from 'vitest';
import { BoardModel } from '../../src/console/boardModel.js';
import { boardTaskOf, boardTaskOfEnvelope, taskIdOfKey, type BoardTask } from '../../src/console/boardTask.js';
import { inboxPrefixOf } from '../../src/console/connection.js';
import { checkCurrentTurn } from '../../src/console/currentTurnCheck.js';
import { questionView } from '../../src/console/questionView.js';
import { movedOrder } from '../../src/console/queueView.js';
import { replyCode, replySentence } from '../../src/console/replySentence.js';
import { visibleRange } from '../../src/console/virtualWindow.js';
import { REPLY_ERROR_CODES } from '../../src/contract/replyErrorCodes.js';

const failure = (code: string, message = 'the worker said so', reason?: string) => ({ ok: false, error: { code, message }, ...(reason ? { reason } : {}) });
const task = (taskId: string, revision: number, pending = '', workspaceId = 'w1'): BoardTask => ({
  taskId,
  workspaceId,
  pending,
  queued: 0,
  revision,
  updatedAt: '',
});

describe('replySentence: a reply code in words a person understands', () => {
  it('says a lost race on a question as someone else answering first', () => {
    expect(replySentence(failure('conflict'), 'question')).toMatch(/^Someone else answered this question first/);
    expect(replyCode(failure('conflict'))).toBe('conflict');
  });

  it('has a sentence of its own for every reply code, none of which repeats the machine message but bad_request', () => {
    const sentences = REPLY_ERROR_CODES.map((code) => replySentence(failure(code, 'MACHINE'), 'question'));
    expect(new Set(sentences).size).toBe(REPLY_ERROR_CODES.length);
    expect(sentences.filter((s) => s.includes('MACHINE'))).toEqual([replySentence(failure('bad_request', 'MACHINE'), 'question')]);
  });

  it('tells a retryable answer apart from an unknown outcome', () => {
    expect(replySentence(failure('retryable'), 'question')).toMatch(/open again; send it again/);
    expect(replySentence(failure('unavailable'), 'question')).toMatch(/outcome is unknown. Trying again is safe/);
  });

  it("names a NATS permission refusal instead of calling it the worker's silence", () => {
    expect(replySentence(failure('unavailable', "Permissions Violation for Publish to 'pending_projector.v1.task.reproject'"))).toMatch(
      /may not make this request/,
    );
  });

  it("reads a queue conflict's reason, and falls back to the queue's general sentence", () => {
    expect(replySentence(failure('conflict', 'x', 'session_unavailable'), 'queue')).toMatch(/cannot take a prompt now/);
    expect(replySentence(failure('conflict', 'x', 'something_new'), 'queue')).toMatch(/queue changed meanwhile/);
  });

  it('says ok as done, and a replayed answer as already recorded', () => {
    expect(replyCode({ ok: true })).toBe('ok');
    expect(replySentence({ ok: true })).toBe('Done.');
    expect(replySentence({ ok: true, claimed: true }, 'question')).toBe('Done.');
    expect(replySentence({ ok: true, claimed: false }, 'question')).toMatch(/already recorded/);
  });
});

describe('visibleRange: the rows of a virtualized list in the DOM', () => {
  it('covers the viewport plus the overscan, within the list', () => {
    expect(visibleRange(0, 320, 32, 100_000, 5)).toEqual({ start: 0, end: 15 });
    expect(visibleRange(32 * 50_000, 320, 32, 100_000, 5)).toEqual({ start: 49_995, end: 50_015 });
    expect(visibleRange(32 * 99_995, 320, 32, 100_000, 5)).toEqual({ start: 99_990, end: 100_000 });
  });

  it('renders nothing for an empty list, and never a range past a list that shrank under the scroll position', () => {
    expect(visibleRange(0, 320, 32, 0)).toEqual({ start: 0, end: 0 });
    expect(visibleRange(32 * 1000, 320, 32, 10, 2)).toEqual({ start: 10, end: 10 });
  });
});

describe('BoardModel: the tasks the board knows', () => {
  it('keeps the newest revision of each task whatever order the bucket and task.list deliver them in', () => {
    const model = new BoardModel();
    expect(model.upsert(task('t1', 2, 'clarification'))).toEqual({ changed: true, changedExisting: false });
    expect(model.upsert(task('t1', 1))).toEqual({ changed: false, changedExisting: false });
    expect(model.upsert(task('t1', 2))).toEqual({ changed: false, changedExisting: false });
    expect(model.upsert(task('t1', 3))).toEqual({ changed: true, changedExisting: true });
    expect(model.get('t1')?.pending).toBe('');
  });

  it('filters by workspace and by needing input, in task id order', () => {
    const model = new BoardModel();
    for (const t of [task('c', 1, 'permission', 'w2'), task('a', 1, 'clarification'), task('b', 1, '', 'w2')]) model.upsert(t);
    const ids = (workspaceId: string, needsInput: boolean) => model.view({ workspaceId, needsInput }).map((t) => t.taskId);
    expect(ids('', false)).toEqual(['a', 'b', 'c']);
    expect(ids('w2', false)).toEqual(['b', 'c']);
    expect(ids('', true)).toEqual(['a', 'c']);
    expect(ids('w2', true)).toEqual(['c']);
    model.remove('a');
    expect(ids('', true)).toEqual(['c']);
    expect([...model.workspaces].sort()).toEqual(['w1', 'w2']);
  });
});

describe("the bucket's entries", () => {
  const envelope = (data: unknown) => new TextEncoder().encode(JSON.stringify({ id: 'e', type: 'task.status_summary.updated', data }));

  it('reads the summary envelope the worker puts, a missing pending_action as none', () => {
    const summary = { revision: 4, updated_at: '2026-12-08T00:00:00Z', pending_action: 'permission', queued_prompt_count: 2 };
    expect(boardTaskOfEnvelope(envelope({ task_id: 't', workspace_id: 'w', status_summary: summary }))).toEqual({
      taskId: 't',
      workspaceId: 'w',
      pending: 'permission',
      queued: 2,
      revision: 4,
      updatedAt: '2026-12-08T00:00:00Z',
    });
    expect(boardTaskOf({ task_id: 't', workspace_id: 'w', status_summary: null })).toMatchObject({ pending: '', revision: 0 });
    expect(boardTaskOfEnvelope(envelope({ task_id: 't', workspace_id: 'w', status_summary: { revision: 1, updated_at: '' } }))?.pending).toBe('');
  });

  it('skips a value that is no summary envelope', () => {
    expect(boardTaskOfEnvelope('not json')).toBeUndefined();
    expect(boardTaskOfEnvelope(envelope({ task_id: 't' }))).toBeUndefined();
  });

  it("decodes the worker's b64. keys back to the task id, and leaves plain keys as they are", () => {
    const id = 'tâche/1 é';
    expect(taskIdOfKey(`b64.${Buffer.from(id).toString('base64url')}`)).toBe(id);
    expect(taskIdOfKey('plain-id_1=')).toBe('plain-id_1=');
  });
});

describe('checkCurrentTurn: the browser resolves the current turn beside the server', () => {
  const turn = (id: string, started_at: string, completed_at: string | null, lifecycle = false) => ({
    id,
    started_at,
    created_at: started_at,
    completed_at,
    metadata: lifecycle ? { lifecycle_only: true } : {},
  });

  it('agrees with the server on the open real turn when a lifecycle turn started after it', () => {
    const turns = [turn('real', '2026-12-08T00:00:00Z', null), turn('lifecycle', '2026-12-08T00:00:01Z', '2026-12-08T00:00:01Z', true)];
    expect(checkCurrentTurn(turns, 'real')).toEqual({ browser: 'real', server: 'real', agree: true });
  });

  it('reports a disagreement, and no conversational turn as none', () => {
    expect(checkCurrentTurn([turn('a', '2026-12-08T00:00:00Z', null)], 'b').agree).toBe(false);
    expect(checkCurrentTurn([turn('l', '2026-12-08T00:00:00Z', null, true)], null)).toEqual({ browser: null, server: null, agree: true });
  });
});

describe('questionView and movedOrder', () => {
  it("reads a question's options by option_id, or id when it has none, and its prompt", () => {
    expect(questionView({ id: 'q1', prompt: 'Which layer?', options: [{ option_id: 'a', label: 'A' }, { id: 'b' }, { label: 'no id' }] })).toEqual({
      prompt: 'Which layer?',
      options: [
        { id: 'a', label: 'A' },
        { id: 'b', label: 'b' },
      ],
      multiple: false,
    });
    expect(questionView(null)).toEqual({ prompt: '(no question text)', options: [], multiple: false });
  });

  it('moves one queue entry up or down, and leaves the order alone at either end', () => {
    expect(movedOrder(['a', 'b', 'c'], 1, -1)).toEqual(['b', 'a', 'c']);
    expect(movedOrder(['a', 'b', 'c'], 1, 1)).toEqual(['a', 'c', 'b']);
    expect(movedOrder(['a', 'b', 'c'], 0, -1)).toEqual(['a', 'b', 'c']);
    expect(movedOrder(['a', 'b', 'c'], 2, 1)).toEqual(['a', 'b', 'c']);
  });
});

describe('inboxPrefixOf: the reply inboxes of the signed-in user', () => {
  it("uses the user's own prefix of deploy/nats, and the default without credentials", () => {
    expect(inboxPrefixOf('ui')).toBe('_INBOX_ui');
    expect(inboxPrefixOf('ops')).toBe('_INBOX_ops');
    expect(inboxPrefixOf(undefined)).toBe('_INBOX');
    expect(inboxPrefixOf('a.b c*')).toBe('_INBOX_a_b_c_');
  });
});
