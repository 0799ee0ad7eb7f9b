import { describe, expect, it } from 'vitest';
import {
  createMonotonicClock,
  isCanonicalTimestamp,
  microsToTimestamp,
  readStoredTimestamp,
  storedTimestampForm,
  timestampToMicros,
  toCanonicalTimestamp,
  toKandevTimestamp,
} from '../../src/timestamps.js';

describe('toCanonicalTimestamp', () => {
  it.each([
    ['2026-08-20T10:00:00Z', '2026-08-20T10:00:00.000000000Z'],
    ['2026-08-20T10:00:00.5Z', '2026-08-20T10:00:00.500000000Z'],
    ['2026-08-20T10:00:00.000001Z', '2026-08-20T10:00:00.000001000Z'],
    ['2026-08-20T10:00:00.123456000Z', '2026-08-20T10:00:00.123456000Z'],
    ['2026-08-20T10:00:00+00:00', '2026-08-20T10:00:00.000000000Z'],
    ['2026-08-20T10:00:00-00:00', '2026-08-20T10:00:00.000000000Z'],
    ['2026-08-20T10:00:00+0000', '2026-08-20T10:00:00.000000000Z'],
    ['2026-08-20T10:00:00+00', '2026-08-20T10:00:00.000000000Z'],
    // PostgreSQL `timestamp` text, as the pg type parser hands it over.
    ['2026-08-20 10:00:00.25', '2026-08-20T10:00:00.250000000Z'],
    [' 2026-08-20T10:00:00Z ', '2026-08-20T10:00:00.000000000Z'],
  ])('writes %j as %j', (input, expected) => {
    expect(toCanonicalTimestamp(input)).toBe(expected);
    expect(isCanonicalTimestamp(toCanonicalTimestamp(input))).toBe(true);
  });

  it('truncates, never rounds, anything finer than a microsecond, as both dialects then hold the same instant', () => {
    expect(toCanonicalTimestamp('2026-08-20T10:00:00.1234567Z')).toBe('2026-08-20T10:00:00.123456000Z');
    expect(toCanonicalTimestamp('2026-08-20T10:00:00.999999999Z')).toBe('2026-08-20T10:00:00.999999000Z');
  });

  it('makes text order equal time order, so SQLite orders canonical text as PostgreSQL orders instants', () => {
    const inputs = [
      '2026-08-20T10:00:00.5Z',
      '2026-08-20T10:00:00Z',
      '2026-08-20T10:00:00.000002Z',
      '2026-08-20T10:00:00.000001Z',
      '2026-08-20T09:59:59.999999Z',
    ];
    const byText = inputs.map((v) => toCanonicalTimestamp(v)).sort();
    const byTime = [...byText].sort((a, b) => timestampToMicros(a) - timestampToMicros(b));
    expect(byText).toEqual(byTime);
    expect(byText[0]).toBe('2026-08-20T09:59:59.999999000Z');
  });

  it('writes a Date at millisecond precision', () => {
    expect(toCanonicalTimestamp(new Date('2026-08-20T10:00:00.123Z'))).toBe('2026-08-20T10:00:00.123000000Z');
  });

  it.each(['2026-08-20T10:00:00+01:00', '2026-08-20T10:00:00-05:00', '2026-08-20T10:00:00+0100', '2026-08-20T12:00:00+02'])(
    'rejects the non-UTC timestamp %j, so a local time can never be stored',
    (input) => {
      expect(() => toCanonicalTimestamp(input)).toThrow(RangeError);
    },
  );

  it.each(['', 'garbage', '2026-08-20', '2026-08-20t10:00:00z', '2026-13-01T00:00:00Z', '2026-08-20T10:00:60Z', '1755684000'])(
    'rejects the malformed timestamp %j',
    (input) => {
      expect(() => toCanonicalTimestamp(input)).toThrow(RangeError);
    },
  );

  // Both are accepted by V8's Date.parse but are not canonical instants: SQLite would store the text
  // as given (and order "…20T24:00" before "…21T00:00", which PostgreSQL reads as the same instant,
  // so the dialects would break a started_at tie differently), while PostgreSQL rejects Feb 30.
  it.each(['2026-02-30T00:00:00Z', '2026-04-31T00:00:00Z', '2026-08-20T24:00:00Z', '2025-02-29T12:00:00Z'])(
    'rejects the calendar-invalid or non-canonical instant %j',
    (input) => {
      expect(() => toCanonicalTimestamp(input)).toThrow(RangeError);
    },
  );

  it('accepts 29 February in a leap year', () => {
    expect(toCanonicalTimestamp('2028-02-29T12:00:00Z')).toBe('2028-02-29T12:00:00.000000000Z');
  });

  it('rejects an invalid Date', () => {
    expect(() => toCanonicalTimestamp(new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe('microsecond conversions', () => {
  it('round-trips canonical timestamps through microseconds since the epoch', () => {
    for (const value of [
      '2026-08-20T10:00:00.000001000Z',
      '1970-01-01T00:00:00.000000000Z',
      '1969-12-31T23:59:59.999999000Z',
      '2099-12-31T23:59:59.999999000Z',
    ]) {
      expect(microsToTimestamp(timestampToMicros(value))).toBe(value);
    }
  });
});

describe('createMonotonicClock', () => {
  it('stamps the wall clock at microsecond resolution in the canonical form', () => {
    const clock = createMonotonicClock(() => Date.parse('2026-08-20T10:00:00.123Z'));
    const stamp = clock();
    expect(stamp).toBe('2026-08-20T10:00:00.123000000Z');
    expect(isCanonicalTimestamp(stamp)).toBe(true);
  });

  it('never repeats a timestamp when the wall clock stands still', () => {
    const clock = createMonotonicClock(() => Date.parse('2026-08-20T10:00:00Z'));
    expect([clock(), clock(), clock()]).toEqual(['2026-08-20T10:00:00.000000000Z', '2026-08-20T10:00:00.000001000Z', '2026-08-20T10:00:00.000002000Z']);
  });

  it('never goes backwards when the wall clock does', () => {
    const readings = [Date.parse('2026-08-20T10:00:01Z'), Date.parse('2026-08-20T10:00:00Z'), Date.parse('2026-08-20T10:00:02Z')];
    const clock = createMonotonicClock(() => readings.shift() ?? 0);
    const stamps = [clock(), clock(), clock()];
    expect(stamps).toEqual(['2026-08-20T10:00:01.000000000Z', '2026-08-20T10:00:01.000001000Z', '2026-08-20T10:00:02.000000000Z']);
    expect([...stamps].sort()).toEqual(stamps);
  });

  it('keeps clocks independent, so a test clock cannot disturb another', () => {
    const a = createMonotonicClock(() => Date.parse('2026-08-20T10:00:00Z'));
    const b = createMonotonicClock(() => Date.parse('2026-08-20T10:00:00Z'));
    a();
    a();
    expect(b()).toBe('2026-08-20T10:00:00.000000000Z');
  });

  it('truncates a wall clock with sub-microsecond fractions (performance.now style) to whole microseconds', () => {
    const clock = createMonotonicClock(() => Date.parse('2026-08-20T10:00:00Z') + 0.0005);
    const stamp = clock();
    expect(isCanonicalTimestamp(stamp)).toBe(true);
    expect(stamp).toBe('2026-08-20T10:00:00.000000000Z');
    expect(clock()).toBe('2026-08-20T10:00:00.000001000Z');
  });

  it('stamps strictly increasing canonical timestamps from the real wall clock', () => {
    const clock = createMonotonicClock();
    const stamps = Array.from({ length: 1000 }, () => clock());
    expect(stamps.every(isCanonicalTimestamp)).toBe(true);
    expect(new Set(stamps).size).toBe(stamps.length);
    expect([...stamps].sort()).toEqual(stamps);
  });
});

describe("Kandev's SQLite timestamp text", () => {
  it.each([
    ['2026-08-20T10:00:00.500000000Z', '2026-08-20 10:00:00.5+00:00'],
    ['2026-08-20T10:00:00.450000000Z', '2026-08-20 10:00:00.45+00:00'],
    ['2026-08-20T10:00:00.000000000Z', '2026-08-20 10:00:00+00:00'],
    ['2026-08-20T10:00:00.000001000Z', '2026-08-20 10:00:00.000001+00:00'],
    ['2026-08-20T10:00:00.123456000Z', '2026-08-20 10:00:00.123456+00:00'],
    ['2026-08-20T10:00:00.100000000Z', '2026-08-20 10:00:00.1+00:00'],
    ['2026-08-20T10:00:00Z', '2026-08-20 10:00:00+00:00'],
    ['2026-08-20 10:00:00.5+00:00', '2026-08-20 10:00:00.5+00:00'],
  ])('writes %j as %j: trailing fractional zeros trimmed, no fraction on a whole second', (input, expected) => {
    expect(toKandevTimestamp(input)).toBe(expected);
    expect(storedTimestampForm(toKandevTimestamp(input))).toBe('kandev');
  });

  it('writes at most microseconds, as the canonical form holds them', () => {
    expect(toKandevTimestamp('2026-08-20T10:00:00.123456789Z')).toBe('2026-08-20 10:00:00.123456+00:00');
  });

  it.each(['2026-08-20T10:00:00+01:00', 'garbage', '2026-02-30T00:00:00Z'])('refuses %j as toCanonicalTimestamp does', (input) => {
    expect(() => toKandevTimestamp(input)).toThrow(RangeError);
  });

  it('makes text order equal time order within the form, whole seconds, trimmed fractions and nanoseconds alike', () => {
    const instants = [
      '2026-08-20T10:00:00Z',
      '2026-08-20T10:00:00.000001Z',
      '2026-08-20T10:00:00.0005Z',
      '2026-08-20T10:00:00.05Z',
      '2026-08-20T10:00:00.45Z',
      '2026-08-20T10:00:00.5Z',
      '2026-08-20T10:00:01Z',
    ];
    const texts = instants.map((v) => toKandevTimestamp(v));
    expect([...texts].reverse().sort()).toEqual(texts);
    // Kandev's own rows carry nanoseconds; they still sort among the microsecond rows this service writes.
    expect(['2026-08-20 10:00:00.000000999+00:00', '2026-08-20 10:00:00.000001+00:00', '2026-08-20 10:00:00+00:00'].sort()).toEqual([
      '2026-08-20 10:00:00+00:00',
      '2026-08-20 10:00:00.000000999+00:00',
      '2026-08-20 10:00:00.000001+00:00',
    ]);
  });

  it('is not text-ordered against the canonical form, which is why a mixed column orders through a key', () => {
    expect('2026-08-20 10:00:05+00:00' < '2026-08-20T10:00:00.000000000Z').toBe(true);
  });
});

describe('storedTimestampForm', () => {
  it.each([
    ['2026-08-20T10:00:00.500000000Z', 'canonical'],
    ['2026-08-20 10:00:00.5+00:00', 'kandev'],
    ['2026-08-20 10:00:00+00:00', 'kandev'],
    ['2026-08-20 10:00:00.123456789+00:00', 'kandev'],
    // Not Kandev's exact form: a trailing zero, an empty fraction, no zone, another spelling of UTC.
    ['2026-08-20 10:00:00.50+00:00', undefined],
    ['2026-08-20 10:00:00.+00:00', undefined],
    ['2026-08-20 10:00:00', undefined],
    ['2026-08-20 10:00:00.5Z', undefined],
    ['2026-08-20T10:00:00.5Z', undefined],
    ['garbage', undefined],
  ] as const)('classifies %j as %s', (text, form) => {
    expect(storedTimestampForm(text)).toBe(form);
  });
});

describe('readStoredTimestamp', () => {
  it.each([
    ['2026-08-20T10:00:00.500000000Z', '2026-08-20T10:00:00.500000000Z'],
    ['2026-08-20 10:00:00.5+00:00', '2026-08-20T10:00:00.500000000Z'],
    ['2026-08-20 10:00:00+00:00', '2026-08-20T10:00:00.000000000Z'],
    ['2026-08-20 10:00:00.123456789+00:00', '2026-08-20T10:00:00.123456000Z'],
    // SQLite's CURRENT_TIMESTAMP, Kandev's default for task_session_messages.updated_at.
    ['2026-08-20 10:00:00', '2026-08-20T10:00:00.000000000Z'],
    ['2026-08-20T10:00:00.123456789Z', '2026-08-20T10:00:00.123456000Z'],
  ])('reads %j back as %j', (text, expected) => {
    expect(readStoredTimestamp(text)).toBe(expected);
  });

  it.each(['', 'garbage', '2026-08-20T10:00:00+01:00'])('returns %j, which is no UTC instant, as stored instead of failing the read', (text) => {
    expect(readStoredTimestamp(text)).toBe(text);
  });

  it("round-trips every canonical instant through Kandev's text", () => {
    for (const micros of [0, 1, 999, 1_000, 450_000, 500_000, 999_999, 1_000_000, 1_787_214_400_123_456]) {
      const canonical = microsToTimestamp(micros);
      expect(readStoredTimestamp(toKandevTimestamp(canonical))).toBe(canonical);
    }
  });
});
