/**
 * One timestamp format for both dialects.
 *
 * SQLite stores timestamps as TEXT and orders them as strings, PostgreSQL stores `timestamp`
 * (microsecond precision). To make SQLite text order equal time order, and to make both dialects
 * hold the very same instants, the repository writes only
 * `YYYY-MM-DDTHH:MM:SS.fffffffffZ` with the last three digits always zero: PostgreSQL would round
 * anything finer, and a tie on one dialect but not the other would change the resolved turn.
 */

const CANONICAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;
const PARSEABLE = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]00(?::?00)?)?$/;

/** A timestamp in the canonical stored form. */
export type CanonicalTimestamp = string;

export function isCanonicalTimestamp(value: string): boolean {
  return CANONICAL.test(value);
}

/**
 * Converts an RFC 3339 UTC string, a PostgreSQL `timestamp` text or a Date into the canonical form,
 * truncating to microseconds. Throws on anything that is not UTC, so a local-time value can never be
 * stored and silently reorder turns.
 */
export function toCanonicalTimestamp(value: string | Date): CanonicalTimestamp {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new RangeError('invalid Date');
    return `${value.toISOString().slice(0, 23)}000000Z`;
  }
  const match = PARSEABLE.exec(value.trim());
  if (!match) throw new RangeError(`not a UTC timestamp: ${JSON.stringify(value)}`);
  const [, date, time, fraction = ''] = match;
  const micros = fraction.padEnd(6, '0').slice(0, 6);
  // Round-trip through Date: V8 also accepts 2026-02-30 and 24:00:00 by rolling them over, which
  // SQLite would store verbatim (and order "…20T24:00" before "…21T00:00", the same instant on
  // PostgreSQL) and PostgreSQL would reject or normalise.
  const instant = new Date(`${date}T${time}Z`);
  if (Number.isNaN(instant.getTime()) || instant.toISOString().slice(0, 19) !== `${date}T${time}`) {
    throw new RangeError(`not a valid instant: ${JSON.stringify(value)}`);
  }
  return `${date}T${time}.${micros}000Z`;
}

/**
 * The two texts a timestamp column of a Kandev-owned table holds on SQLite:
 * - `canonical`: this service's `YYYY-MM-DDTHH:MM:SS.fffffffffZ` (above);
 * - `kandev`: what Kandev's Go SQLite driver writes, `YYYY-MM-DD HH:MM:SS[.f]+00:00`, with 1 to 9
 *   fractional digits, trailing zeros trimmed, and no fraction at all on a whole second.
 * Within one form text order is time order; across the two it is not (' ' sorts before 'T'), so a
 * column holding both is ordered through `SqlDialect.timestampKey`.
 */
export type TimestampForm = 'canonical' | 'kandev';

const KANDEV = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{0,8}[1-9])?\+00:00$/;
// What this service writes and the pg type parser returns: microseconds, the last three digits zero.
const CANONICAL_MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}000Z$/;

/** Which of the two stored forms `text` is, exactly; undefined for any other text (another producer's). */
export function storedTimestampForm(text: string): TimestampForm | undefined {
  if (CANONICAL.test(text)) return 'canonical';
  if (KANDEV.test(text)) return 'kandev';
  return undefined;
}

/**
 * Kandev's SQLite text of an instant: `2026-08-20 10:00:00.5+00:00`, `2026-08-20 10:00:00+00:00`.
 * Accepts what `toCanonicalTimestamp` accepts, so the instant is the one the canonical form holds.
 */
export function toKandevTimestamp(value: string | Date): string {
  const canonical = toCanonicalTimestamp(value);
  const fraction = canonical.slice(20, 29).replace(/0+$/, '');
  return `${canonical.slice(0, 10)} ${canonical.slice(11, 19)}${fraction === '' ? '' : `.${fraction}`}+00:00`;
}

/**
 * A timestamp read back from the database, in the canonical form whichever form it was stored in
 * (the same instant `SqlDialect.timestampKey` orders by: truncated to microseconds). Text that is no
 * UTC timestamp at all, written by another producer, is returned as stored: one such row must not
 * fail a read that other rows depend on, as malformed metadata reads as "no keys".
 */
export function readStoredTimestamp(text: string): CanonicalTimestamp {
  if (CANONICAL_MICROS.test(text)) return text;
  try {
    return toCanonicalTimestamp(text);
  } catch {
    return text;
  }
}

/** Microseconds since the epoch of a canonical timestamp (exact: fits in a double until year 2255). */
export function timestampToMicros(value: CanonicalTimestamp): number {
  const millis = Date.parse(`${value.slice(0, 19)}Z`);
  return millis * 1000 + Number(value.slice(20, 26));
}

export function microsToTimestamp(micros: number): CanonicalTimestamp {
  const seconds = Math.floor(micros / 1_000_000);
  const rest = micros - seconds * 1_000_000;
  const base = new Date(seconds * 1000).toISOString().slice(0, 19);
  return `${base}.${String(rest).padStart(6, '0')}000Z`;
}

/** `instant` plus `ms` milliseconds (an expiry, a retry time), as a canonical instant. */
export function instantAfter(instant: CanonicalTimestamp, ms: number): CanonicalTimestamp {
  return microsToTimestamp(timestampToMicros(instant) + Math.round(ms * 1000));
}

/** A source of canonical timestamps; injectable so tests can pin time. */
export type Clock = () => CanonicalTimestamp;

/**
 * Wall clock at microsecond resolution that never repeats or goes backwards within one process:
 * two writes in the same microsecond would otherwise tie on `created_at` and leave the order to
 * the random turn id.
 */
export function createMonotonicClock(now: () => number = () => Date.now()): Clock {
  let last = 0;
  return () => {
    // Whole microseconds: a sub-millisecond source (performance.now style) would otherwise leak a
    // fraction of a microsecond into the text.
    const micros = Math.max(Math.floor(now() * 1000), last + 1);
    last = micros;
    return microsToTimestamp(micros);
  };
}

export const systemClock: Clock = createMonotonicClock();
