import { describe, expect, it } from 'vitest';
import { isPromptable, sessionToWake } from '../../src/services/prompts/promptDispatchRules.js';
import { SESSION_STATES } from '../../src/turns/pendingAction.js';

describe('isPromptable', () => {
  it('takes a prompt only when the session is IDLE or WAITING_FOR_INPUT', () => {
    expect(SESSION_STATES.filter(isPromptable)).toEqual(['IDLE', 'WAITING_FOR_INPUT']);
  });

  it('refuses a state it does not know', () => {
    expect(isPromptable('PAUSED')).toBe(false);
  });
});

describe('sessionToWake', () => {
  it('wakes the session that finished a turn', () => {
    expect(sessionToWake('turn.completed', { session_id: 's1' })).toBe('s1');
  });

  it('wakes a session that moved to any state but RUNNING', () => {
    expect(sessionToWake('task_session.state_changed', { session_id: 's1', new_state: 'IDLE' })).toBe('s1');
    expect(sessionToWake('task_session.state_changed', { session_id: 's1', new_state: 'COMPLETED' })).toBe('s1');
    expect(sessionToWake('task_session.state_changed', { session_id: 's1', new_state: 'RUNNING' })).toBeUndefined();
  });

  it('wakes nothing for other events, or without a session', () => {
    expect(sessionToWake('turn.started', { session_id: 's1' })).toBeUndefined();
    expect(sessionToWake('message.added', { session_id: 's1' })).toBeUndefined();
    expect(sessionToWake('turn.completed', {})).toBeUndefined();
  });
});
