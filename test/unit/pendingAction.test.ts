import { describe, expect, it } from 'vitest';
import {
  SESSION_STATES,
  isInputCapableSessionState,
  isPendingAction,
  isTerminalSessionState,
  taskPendingAction,
  type SessionPendingAction,
} from '../../src/turns/index.js';

const session = (state: string, pendingAction: SessionPendingAction['pendingAction']): SessionPendingAction => ({ state, pendingAction });

describe('taskPendingAction', () => {
  it('returns permission when one input-capable session asks for permission and another for clarification, in either order', () => {
    const sessions = [session('RUNNING', 'clarification'), session('WAITING_FOR_INPUT', 'permission')];
    expect(taskPendingAction(sessions)).toBe('permission');
    expect(taskPendingAction([...sessions].reverse())).toBe('permission');
  });

  it('returns clarification when the only pending input-capable session asks a question', () => {
    expect(taskPendingAction([session('RUNNING', null), session('WAITING_FOR_INPUT', 'clarification')])).toBe('clarification');
  });

  it('returns null when no input-capable session has a pending action', () => {
    expect(taskPendingAction([session('RUNNING', null), session('WAITING_FOR_INPUT', null)])).toBeNull();
    expect(taskPendingAction([])).toBeNull();
  });

  it.each(SESSION_STATES.filter((s) => !isInputCapableSessionState(s)))('ignores a %s session, whatever it has pending', (state) => {
    expect(taskPendingAction([session(state, 'permission')])).toBeNull();
    expect(taskPendingAction([session(state, 'clarification')])).toBeNull();
    expect(taskPendingAction([session(state, 'permission'), session('RUNNING', 'clarification')])).toBe('clarification');
  });

  it('ignores a session in a state it does not know', () => {
    expect(taskPendingAction([session('PAUSED', 'permission'), session('running', 'clarification')])).toBeNull();
  });

  it('accepts any iterable of sessions, such as a generator', () => {
    function* sessions(): Generator<SessionPendingAction> {
      yield session('IDLE', 'permission');
      yield session('RUNNING', 'clarification');
      yield session('WAITING_FOR_INPUT', 'permission');
    }
    expect(taskPendingAction(sessions())).toBe('permission');
  });
});

describe('session state vocabulary', () => {
  it('treats exactly RUNNING and WAITING_FOR_INPUT as input-capable', () => {
    expect(SESSION_STATES.filter(isInputCapableSessionState)).toEqual(['RUNNING', 'WAITING_FOR_INPUT']);
  });

  it('treats exactly COMPLETED, FAILED and CANCELLED as terminal', () => {
    expect(SESSION_STATES.filter(isTerminalSessionState)).toEqual(['COMPLETED', 'FAILED', 'CANCELLED']);
    expect(isTerminalSessionState('completed')).toBe(false);
  });

  it('recognises only the two pending-action values', () => {
    expect(isPendingAction('clarification')).toBe(true);
    expect(isPendingAction('permission')).toBe(true);
    for (const value of ['Clarification', '', null, undefined, 1, 'question']) expect(isPendingAction(value)).toBe(false);
  });
});
