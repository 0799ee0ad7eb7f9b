import type { SqlDialect } from '../dialect.js';
import { TERMINAL_SESSION_STATES } from '../../turns/sessionStates.js';

/** SQL fragments shared by the pending-action and clarification reads and writes. */

export const TERMINAL_STATES_SQL = `(${TERMINAL_SESSION_STATES.map((s) => `'${s}'`).join(', ')})`;

/** A row that still awaits an answer: status absent, JSON null, '' or 'pending'. */
export function pendingStatusPredicate(dialect: SqlDialect, metadataColumn: string): string {
  return `${dialect.jsonStringOrAbsent(metadataColumn, 'status')} IN ('', 'pending')`;
}

export const CLARIFICATION_TYPE = 'clarification_request';
export const PERMISSION_TYPE = 'permission_request';

export const KNOWN_CLARIFICATION_STATUSES = ['', 'pending', 'answered', 'rejected', 'expired', 'cancelled'] as const;

export function pendingIdOf(dialect: SqlDialect, alias: string): string {
  return dialect.jsonString(`${alias}.metadata`, 'pending_id');
}

/** Flat `question_id` wins, nested `question.id` is the fallback, '' when neither is a non-empty string. */
export function questionIdOf(dialect: SqlDialect, alias: string): string {
  return (
    `COALESCE(NULLIF(${dialect.jsonString(`${alias}.metadata`, 'question_id')}, ''), ` +
    `NULLIF(${dialect.jsonString(`${alias}.metadata`, 'question', 'id')}, ''), '')`
  );
}

export function isPending(dialect: SqlDialect, alias: string): string {
  return pendingStatusPredicate(dialect, `${alias}.metadata`);
}

export function statusIs(dialect: SqlDialect, alias: string, status: string): string {
  if (!/^[a-z_]+$/.test(status)) throw new Error(`bad status ${status}`);
  return `${dialect.jsonStringOrAbsent(`${alias}.metadata`, 'status')} = '${status}'`;
}

export function nonTerminalSession(alias: string): string {
  return `EXISTS (SELECT 1 FROM task_sessions ${alias}_session WHERE ${alias}_session.id = ${alias}.task_session_id AND ${alias}_session.state NOT IN ${TERMINAL_STATES_SQL})`;
}

/**
 * A bundle is well-formed only when every row sharing its pending_id is a clarification of the same
 * session and turn; otherwise claims and restores refuse the whole bundle.
 */
export function wellFormedBundle(dialect: SqlDialect, alias: string): string {
  const other = `${alias}_sibling`;
  return (
    `NOT EXISTS (SELECT 1 FROM task_session_messages ${other} WHERE ${pendingIdOf(dialect, other)} = ${pendingIdOf(dialect, alias)} ` +
    `AND (${other}.task_session_id <> ${alias}.task_session_id OR ${other}.turn_id <> ${alias}.turn_id OR ${other}.type <> '${CLARIFICATION_TYPE}'))`
  );
}
