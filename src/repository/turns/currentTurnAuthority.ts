import type { SqlDialect } from '../dialect.js';

/**
 * Vocabulary of the current-turn authority (ADR 0001 in docs/decisions):
 * - turn record: a row of `task_session_turns`;
 * - lifecycle turn: a record whose metadata `lifecycle_only` flag is true; it exists only to parent
 *   a lifecycle message (agent boot on resume) and never owns state;
 * - conversational turn: every other record, including legacy unmarked zero-duration ones (D4);
 * - authority-eligible: passes Kandev's reservation filter (not an unattempted, message-less
 *   `prompt_dispatch_pending` reservation) and is conversational;
 * - current turn: the first authority-eligible record of a session under D1's total order.
 */

export const TURN_META_LIFECYCLE_ONLY = 'lifecycle_only';
export const TURN_META_PROMPT_DISPATCH_PENDING = 'prompt_dispatch_pending';
export const TURN_META_PROMPT_DISPATCH_ATTEMPTED = 'prompt_dispatch_attempted';

export interface CurrentTurnAuthority {
  /** Parenthesised boolean conjunct for `WHERE ... AND ${predicate}`. */
  predicate: string;
  /** D1's four keys as a bare expression list for `ORDER BY` or `OVER (... ORDER BY ...)`. */
  orderBy: string;
}

function messageEvidence(turnAlias: string): string {
  return `EXISTS (SELECT 1 FROM task_session_messages ${turnAlias}_evidence WHERE ${turnAlias}_evidence.turn_id = ${turnAlias}.id)`;
}

/**
 * The one rule for "which turn owns this session's state". Every SQL site that resolves a current
 * turn takes both fragments from this call and writes neither itself (spec AC-3), whatever its
 * shape: scalar subquery, CTE, window or top-level ORDER BY/LIMIT.
 *
 * Key 1 puts open turns first, so a completed turn started later (a legacy unmarked lifecycle turn)
 * cannot shadow the real open one (AC-6); keys 2-4 are Kandev's historical order, and `id` makes the
 * order total. Keys 2 and 3 compare instants whatever text form a row was written in
 * (`SqlDialect.timestampKey`), so SQLite and PostgreSQL resolve the same turn (D9).
 */
export function currentTurnAuthority(dialect: SqlDialect, turnAlias: string): CurrentTurnAuthority {
  const t = turnAlias;
  const reservationAdmits =
    `NOT ${dialect.jsonFlag(`${t}.metadata`, TURN_META_PROMPT_DISPATCH_PENDING)}` +
    ` OR ${dialect.jsonFlag(`${t}.metadata`, TURN_META_PROMPT_DISPATCH_ATTEMPTED)}` +
    ` OR ${messageEvidence(t)}`;
  return {
    predicate: `((${reservationAdmits}) AND NOT ${dialect.jsonFlag(`${t}.metadata`, TURN_META_LIFECYCLE_ONLY)})`,
    orderBy:
      `CASE WHEN ${t}.completed_at IS NULL THEN 0 ELSE 1 END ASC, ` +
      `${dialect.timestampKey(`${t}.started_at`)} DESC, ${dialect.timestampKey(`${t}.created_at`)} DESC, ${dialect.binaryText(`${t}.id`)} DESC`,
  };
}

/**
 * Kandev's visible-history rule for the turns listing (spec AC-11): a turn is shown unless it is a
 * pending reservation with no message. Lifecycle turns stay visible so the boot message keeps its
 * own group in the transcript.
 */
export function turnHistoryPredicate(dialect: SqlDialect, turnAlias: string): string {
  const t = turnAlias;
  return `(NOT ${dialect.jsonFlag(`${t}.metadata`, TURN_META_PROMPT_DISPATCH_PENDING)} OR ${messageEvidence(t)})`;
}

/**
 * The scalar-subquery shape of the rule: the current turn id of the session in `sessionColumn`,
 * for `... AND m.turn_id = ${currentTurnIdSubquery(...)}`. NULL when no turn resolves, so the
 * comparison matches nothing (D8).
 */
export function currentTurnIdSubquery(dialect: SqlDialect, sessionColumn: string, turnAlias = 'current_turn'): string {
  const authority = currentTurnAuthority(dialect, turnAlias);
  return (
    `(SELECT ${turnAlias}.id FROM task_session_turns ${turnAlias} ` +
    `WHERE ${turnAlias}.task_session_id = ${sessionColumn} AND ${authority.predicate} ` +
    `ORDER BY ${authority.orderBy} LIMIT 1)`
  );
}
