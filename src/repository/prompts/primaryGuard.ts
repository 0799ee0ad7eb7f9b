import type { SqlDialect } from '../dialect.js';

/**
 * A Run queued behind a busy primary may only reach the session that was primary when it was
 * accepted (Kandev's Run targets the primary). The entry carries `primary_only: true` in its
 * metadata; once its session is no longer the task's primary it can never be delivered: the
 * dispatcher refuses it (`primary_session_changed`) and the queue lifecycle cancels it, its
 * comments returned.
 */
export const PRIMARY_ONLY_KEY = 'primary_only';

/** Boolean SQL: the receipt aliased `receipt` is guarded to the primary, and the session row aliased `session` (NULL when gone) is not it. */
export function primaryGuardBroken(dialect: SqlDialect, receipt: string, session: string): string {
  return `(${dialect.jsonFlag(`${receipt}.metadata_json`, PRIMARY_ONLY_KEY)} AND COALESCE(${session}.is_primary, 0) <> 1)`;
}
