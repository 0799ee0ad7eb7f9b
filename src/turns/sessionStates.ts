/**
 * What each Kandev session state means for prompts and for a session's queue: the one table every
 * rule reads (acceptance, the dispatcher's reservation and marker, the queue's lifecycle).
 *
 * - **promptable**: the agent takes a prompt now (Kandev's PROMPTABLE). A direct prompt is
 *   accepted, and a queued one delivered, only then.
 * - **active**: the session is alive (Kandev's ACTIVE): a prompt may be queued for it.
 * - **terminal**: the agent will never take a prompt again; its waiting entries are cancelled.
 *
 * A state this table does not know (a newer producer's) is none of the three: nothing is accepted
 * for it, and its entries wait, uncancelled, until the session moves to a state it knows.
 */

export const SESSION_STATES = ['CREATED', 'STARTING', 'RUNNING', 'IDLE', 'WAITING_FOR_INPUT', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
export type SessionState = (typeof SESSION_STATES)[number];

export interface SessionStateRule {
  promptable: boolean;
  active: boolean;
  terminal: boolean;
}

export const SESSION_STATE_RULES: Readonly<Record<SessionState, SessionStateRule>> = {
  CREATED: { promptable: false, active: true, terminal: false },
  STARTING: { promptable: false, active: true, terminal: false },
  RUNNING: { promptable: false, active: true, terminal: false },
  IDLE: { promptable: true, active: true, terminal: false },
  WAITING_FOR_INPUT: { promptable: true, active: true, terminal: false },
  COMPLETED: { promptable: false, active: false, terminal: true },
  FAILED: { promptable: false, active: false, terminal: true },
  CANCELLED: { promptable: false, active: false, terminal: true },
};

const UNKNOWN: SessionStateRule = { promptable: false, active: false, terminal: false };

/** The rule of `state`; an unknown state's is all false. */
export function sessionStateRule(state: string): SessionStateRule {
  return Object.hasOwn(SESSION_STATE_RULES, state) ? SESSION_STATE_RULES[state as SessionState] : UNKNOWN;
}

function statesWhere(flag: keyof SessionStateRule): readonly SessionState[] {
  return SESSION_STATES.filter((state) => SESSION_STATE_RULES[state][flag]);
}

export const PROMPTABLE_SESSION_STATES: readonly string[] = statesWhere('promptable');
export const ACTIVE_SESSION_STATES: readonly string[] = statesWhere('active');
export const TERMINAL_SESSION_STATES: readonly SessionState[] = statesWhere('terminal');

export function isPromptableSessionState(state: string): boolean {
  return sessionStateRule(state).promptable;
}

export function isTerminalSessionState(state: string): boolean {
  return sessionStateRule(state).terminal;
}
