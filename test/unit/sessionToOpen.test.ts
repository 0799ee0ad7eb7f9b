import { describe, expect, it } from 'vitest';
import { sessionToOpen, type NavigableSession } from '../../src/turns/index.js';

const session = (session_id: string, state: string, pending_action: NavigableSession['pending_action'] = null, is_primary = false): NavigableSession => ({
  session_id,
  state,
  is_primary,
  pending_action,
});

describe('sessionToOpen: the session a task row opens', () => {
  it('opens the secondary session that owns the question, before the remembered and the primary session', () => {
    const sessions = [session('primary', 'RUNNING', null, true), session('secondary', 'WAITING_FOR_INPUT', 'clarification')];
    expect(sessionToOpen('clarification', sessions, 'primary')).toBe('secondary');
  });

  it('takes the newest of several matching input-capable sessions', () => {
    const sessions = [session('old', 'RUNNING', 'clarification'), session('new', 'WAITING_FOR_INPUT', 'clarification'), session('idle', 'IDLE')];
    expect(sessionToOpen('clarification', sessions)).toBe('new');
  });

  it('matches the task-level action: a permission elsewhere wins over a newer session asking a question', () => {
    const sessions = [session('asks-permission', 'RUNNING', 'permission'), session('asks-question', 'RUNNING', 'clarification')];
    expect(sessionToOpen('permission', sessions)).toBe('asks-permission');
  });

  it('never opens a session that cannot take input for the pending action, even if it carries one', () => {
    const sessions = [session('live', 'RUNNING', 'clarification'), session('ended', 'COMPLETED', 'clarification', true)];
    expect(sessionToOpen('clarification', sessions, 'ended')).toBe('live');
  });

  it('falls back to the newest session with any pending action when none matches a stale task value', () => {
    const sessions = [session('p', 'RUNNING', null, true), session('asks', 'RUNNING', 'clarification')];
    expect(sessionToOpen('permission', sessions, 'p')).toBe('asks');
  });

  it('without a pending action: the remembered session, then the primary, then the newest', () => {
    const sessions = [session('a', 'IDLE'), session('primary', 'IDLE', null, true), session('c', 'IDLE')];
    expect(sessionToOpen(null, sessions, 'a')).toBe('a');
    expect(sessionToOpen(null, sessions, 'gone')).toBe('primary');
    expect(sessionToOpen(null, sessions)).toBe('primary');
    expect(sessionToOpen(null, [session('a', 'IDLE'), session('c', 'IDLE')])).toBe('c');
    // A pending action no input-capable session carries leaves the preferences to decide.
    expect(sessionToOpen('clarification', sessions, 'a')).toBe('a');
  });

  it('is null for a task without sessions', () => {
    expect(sessionToOpen('clarification', [], 'x')).toBeNull();
  });
});
