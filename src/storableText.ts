import { z } from 'zod';

/**
 * The strings from outside that the worker binds into SQL (ids, answer text) must be stored and
 * matched alike by both dialects, so the schemas refuse, before any SQL:
 * - NUL (U+0000): PostgreSQL rejects it in text (SQLSTATE 22021) and in jsonb (22P05), on every
 *   retry; SQLite stores it.
 * - a lone UTF-16 surrogate: neither driver can encode it as UTF-8, and each replaces it with its
 *   own substitute (pg one U+FFFD, better-sqlite3 three), so the stored string is not the one sent
 *   and differs by dialect; PostgreSQL's jsonb rejects its JSON escape outright (22P02).
 */

/**
 * Longest id accepted, in UTF-16 code units (JavaScript's `length`, as zod counts). Kandev's ids are
 * UUIDs (36 characters); 256 leaves room for other id schemes while every id stays a small index
 * key and log field: at most 768 UTF-8 bytes, far below PostgreSQL's ~2.7 KB B-tree entry limit.
 */
export const MAX_ID_LENGTH = 256;

/** Marks the zod issues of an id rule, so a caller can tell a bad id from another schema violation. */
export const INVALID_ID_ISSUE = 'invalid_id';

const LONE_SURROGATE = /\p{Surrogate}/u;

/** Why `value` cannot be stored alike by both dialects, or undefined when it can. */
export function unstorableTextProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain a NUL character (U+0000)';
  if (LONE_SURROGATE.test(value)) return 'must not contain a lone UTF-16 surrogate';
  return undefined;
}

/** Why `value` is not an id this service accepts, or undefined when it is one. */
export function idProblem(value: string): string | undefined {
  if (value.length === 0) return 'must not be empty';
  if (value.length > MAX_ID_LENGTH) return `must be at most ${MAX_ID_LENGTH} characters, not ${value.length}`;
  return unstorableTextProblem(value);
}

/** A non-empty string of at most MAX_ID_LENGTH code units that both dialects store as sent. */
export const idSchema = z.string().superRefine((value, ctx) => {
  const problem = idProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: `id ${problem}`, params: { [INVALID_ID_ISSUE]: true } });
});

/** Any string both dialects store as sent. */
export const storableTextSchema = z.string().superRefine((value, ctx) => {
  const problem = unstorableTextProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});
