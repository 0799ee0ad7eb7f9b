import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ACTIVE_SESSION_STATES,
  PROMPTABLE_SESSION_STATES,
  SESSION_STATES,
  TERMINAL_SESSION_STATES,
  isPromptableSessionState,
  isTerminalSessionState,
  sessionStateRule,
} from '../../src/turns/index.js';

describe('session state rules', () => {
  it('takes a prompt only when the session is IDLE or WAITING_FOR_INPUT', () => {
    expect(SESSION_STATES.filter(isPromptableSessionState)).toEqual(['IDLE', 'WAITING_FOR_INPUT']);
    expect(PROMPTABLE_SESSION_STATES).toEqual(['IDLE', 'WAITING_FOR_INPUT']);
  });

  it('queues for every live state and cancels the queues of the three terminal ones', () => {
    expect(ACTIVE_SESSION_STATES).toEqual(['CREATED', 'STARTING', 'RUNNING', 'IDLE', 'WAITING_FOR_INPUT']);
    expect(TERMINAL_SESSION_STATES).toEqual(['COMPLETED', 'FAILED', 'CANCELLED']);
    for (const state of SESSION_STATES) {
      const rule = sessionStateRule(state);
      expect(rule.active !== rule.terminal, state).toBe(true);
      if (rule.promptable) expect(rule.active, state).toBe(true);
    }
  });

  it('treats a state it does not know as neither promptable, active nor terminal', () => {
    for (const state of ['PAUSED', 'idle', 'completed', 'toString', '__proto__', '']) {
      expect(sessionStateRule(state), state).toEqual({ promptable: false, active: false, terminal: false });
      expect(isPromptableSessionState(state)).toBe(false);
      expect(isTerminalSessionState(state)).toBe(false);
    }
  });

  it('is the table docs/endpoints.md shows', () => {
    const doc = readFileSync(new URL('../../docs/endpoints.md', import.meta.url), 'utf8');
    const yesNo = (flag: boolean) => (flag ? 'yes' : 'no');
    for (const state of SESSION_STATES) {
      const { promptable, active, terminal } = sessionStateRule(state);
      expect(doc, state).toContain(`| \`${state}\` | ${yesNo(promptable)} | ${yesNo(active)} | ${yesNo(terminal)} |`);
    }
  });
});
