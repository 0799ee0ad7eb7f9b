import { describe, expect, it } from 'vitest';
import { queueScopeToSettle, sessionToWake } from '../../src/services/prompts/promptDispatchRules.js';

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

describe('queueScopeToSettle', () => {
  it('settles a task on task.updated and task.deleted', () => {
    expect(queueScopeToSettle('task.updated', { task_id: 't1' })).toEqual({ taskId: 't1' });
    expect(queueScopeToSettle('task.deleted', { task_id: 't1' })).toEqual({ taskId: 't1' });
    expect(queueScopeToSettle('task.updated', {})).toBeUndefined();
  });

  it.each(['COMPLETED', 'FAILED', 'CANCELLED'])('settles a session that moved to %s', (state) => {
    expect(queueScopeToSettle('task_session.state_changed', { session_id: 's1', task_id: 't1', new_state: state })).toEqual({ sessionId: 's1' });
  });

  it.each(['IDLE', 'RUNNING', 'WAITING_FOR_INPUT', 'PAUSED', 'completed'])('leaves a session that moved to %s', (state) => {
    expect(queueScopeToSettle('task_session.state_changed', { session_id: 's1', new_state: state })).toBeUndefined();
  });

  it('leaves every other event', () => {
    expect(queueScopeToSettle('turn.completed', { session_id: 's1', task_id: 't1' })).toBeUndefined();
    expect(queueScopeToSettle('message.queue.status_changed', { session_id: 's1', task_id: 't1' })).toBeUndefined();
  });
});
