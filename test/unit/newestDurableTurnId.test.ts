import { describe, expect, it } from 'vitest';
import { durableTurnSchema } from '../support/turnPayload.js';
import { durableTurnTimestampKey, isLifecycleTurn, isTruthyFlag, newestDurableTurnId, type DurableTurn } from '../../src/turns/index.js';
import { CurrentTurnFixtureError, loadCurrentTurnFixture, parseCurrentTurnFixture } from '../support/currentTurnFixture.js';

const cases = loadCurrentTurnFixture();

function completed(id: string, startedAt: string, metadata?: Record<string, unknown> | null): DurableTurn {
  return { id, started_at: startedAt, created_at: startedAt, completed_at: startedAt, metadata };
}

describe('newestDurableTurnId against the shared fixture (spec AC-10)', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, fixtureCase) => {
    expect(newestDurableTurnId(fixtureCase.turns)).toBe(fixtureCase.expectedCurrentTurnId);
  });

  it.each(cases.map((c) => [c.name, c] as const))('resolves the same turn whatever the input order: %s', (_name, fixtureCase) => {
    expect(newestDurableTurnId([...fixtureCase.turns].reverse())).toBe(fixtureCase.expectedCurrentTurnId);
  });

  it('hands the resolver open turns without a completed_at property, as the payload type declares them', () => {
    const openTurns = cases.flatMap((c) => c.rows.filter((row) => row.completed_at === null).map((row) => ({ c, row })));
    expect(openTurns.length).toBeGreaterThan(0);
    for (const { c, row } of openTurns) {
      const turn = c.turns.find((t) => t.id === row.id);
      expect(turn && 'completed_at' in turn).toBe(false);
    }
  });

  it('pins every AC-9 marker value, each against an older completed real turn', () => {
    const markerValues = cases.flatMap((c) =>
      c.rows.filter((row) => row.metadata !== null).map((row) => (row.metadata as Record<string, unknown>).lifecycle_only),
    );
    const pinned = [true, 1, 'true', '1', undefined, null, false, 0, '', 'false', '0', 'yes', {}, [], ['1']];
    for (const value of pinned) {
      expect(
        markerValues.some((v) => (value === undefined ? v === undefined : JSON.stringify(v) === JSON.stringify(value))),
        JSON.stringify(value) ?? 'absent',
      ).toBe(true);
    }
  });

  it('carries at least one case that resolves no current turn (D8)', () => {
    expect(cases.some((c) => c.expectedCurrentTurnId === null)).toBe(true);
  });
});

describe('newestDurableTurnId', () => {
  it('returns undefined while the history is not loaded, so callers fall back to pending_action', () => {
    expect(newestDurableTurnId(undefined)).toBeUndefined();
    expect(newestDurableTurnId(null)).toBeUndefined();
  });

  it('returns null for a loaded, empty history', () => {
    expect(newestDurableTurnId([])).toBeNull();
  });

  it('returns null, not undefined, when every turn is a lifecycle turn', () => {
    const turns = [completed('b1', '2026-08-20T10:00:00Z', { lifecycle_only: true }), completed('b2', '2026-08-20T10:01:00Z', { lifecycle_only: '1' })];
    expect(newestDurableTurnId(turns)).toBeNull();
  });

  it('orders an exact second before the same second plus one nanosecond', () => {
    expect(durableTurnTimestampKey('2026-08-20T10:00:00Z') < durableTurnTimestampKey('2026-08-20T10:00:00.000000001Z')).toBe(true);
    const turns = [completed('turn-z', '2026-08-20T10:00:00Z'), completed('turn-a', '2026-08-20T10:00:00.000000001Z')];
    expect(newestDurableTurnId(turns)).toBe('turn-a');
    expect(newestDurableTurnId([...turns].reverse())).toBe('turn-a');
  });

  it('treats fractions of different lengths naming the same instant as a tie', () => {
    expect(durableTurnTimestampKey('2026-08-20T10:00:00.5Z')).toBe(durableTurnTimestampKey('2026-08-20T10:00:00.500000000Z'));
    expect(durableTurnTimestampKey('2026-08-20T10:00:00Z')).toBe(durableTurnTimestampKey('2026-08-20T10:00:00.000Z'));
  });

  it('treats null and an absent completed_at alike as an open turn', () => {
    const later = completed('turn-z', '2026-08-20T11:00:00Z');
    const openAbsent: DurableTurn = { id: 'turn-a', started_at: '2026-08-20T10:00:00Z', created_at: '2026-08-20T10:00:00Z' };
    const openNull: DurableTurn = { ...openAbsent, completed_at: null };
    expect(newestDurableTurnId([later, openAbsent])).toBe('turn-a');
    expect(newestDurableTurnId([later, openNull])).toBe('turn-a');
  });

  it('does not reorder or modify the history it is given', () => {
    const turns = [completed('turn-b', '2026-08-20T11:00:00Z'), completed('turn-a', '2026-08-20T10:00:00Z')];
    const snapshot = structuredClone(turns);
    newestDurableTurnId(turns);
    expect(turns).toEqual(snapshot);
  });
});

describe('the lifecycle marker test (spec AC-9)', () => {
  it.each([[true], [1], ['true'], ['1']])('reads lifecycle_only = %j as lifecycle', (value) => {
    expect(isTruthyFlag(value)).toBe(true);
    expect(isLifecycleTurn({ metadata: { lifecycle_only: value } })).toBe(true);
  });

  it.each([[undefined], [null], [false], [0], [''], ['false'], ['0'], ['yes'], [{}], [[]], [['1']], ['TRUE'], [' 1'], [2]])(
    'reads lifecycle_only = %j as conversational',
    (value) => {
      expect(isTruthyFlag(value)).toBe(false);
      expect(isLifecycleTurn({ metadata: { lifecycle_only: value } })).toBe(false);
    },
  );

  it('reads a missing, null or array metadata document as conversational', () => {
    expect(isLifecycleTurn({})).toBe(false);
    expect(isLifecycleTurn({ metadata: null })).toBe(false);
    expect(isLifecycleTurn({ metadata: [true] as unknown as Record<string, unknown> })).toBe(false);
  });

  it('never reads the marker from completed_at = started_at (D3)', () => {
    const zeroDuration = completed('turn-zero', '2026-08-20T10:00:00Z');
    expect(isLifecycleTurn(zeroDuration)).toBe(false);
    expect(newestDurableTurnId([completed('turn-older', '2026-08-20T09:00:00Z'), zeroDuration])).toBe('turn-zero');
  });
});

describe('the turn payload schema', () => {
  it('accepts an open turn with completed_at absent or null, and the canonical nine-digit server form', () => {
    const base = { id: 't', started_at: '2026-08-20T10:00:00.123456000Z', created_at: '2026-08-20T10:00:00Z' };
    expect(durableTurnSchema.safeParse(base).success).toBe(true);
    expect(durableTurnSchema.safeParse({ ...base, completed_at: null, metadata: null }).success).toBe(true);
  });

  it.each(['2026-08-20T10:00:00+01:00', '2026-08-20T10:00:00', '2026-08-20 10:00:00Z', '2026-02-30T10:00:00Z', '2026-08-20T10:00:00.1234567890Z'])(
    'rejects the timestamp %s, which the client comparison cannot order',
    (value) => {
      expect(durableTurnSchema.safeParse({ id: 't', started_at: value, created_at: '2026-08-20T10:00:00Z' }).success).toBe(false);
    },
  );

  it('rejects metadata that is not an object', () => {
    const base = { id: 't', started_at: '2026-08-20T10:00:00Z', created_at: '2026-08-20T10:00:00Z' };
    expect(durableTurnSchema.safeParse({ ...base, metadata: [] }).success).toBe(false);
    expect(durableTurnSchema.safeParse({ ...base, metadata: 'garbage' }).success).toBe(false);
  });
});

describe('the shared fixture loader', () => {
  const validTurn = { id: 't1', started_at: '2026-08-20T10:00:00Z', created_at: '2026-08-20T10:00:00Z', completed_at: null, metadata: {} };
  const file = (cases: unknown) => JSON.stringify({ cases });

  it('throws, rather than skipping, when the fixture file is missing', () => {
    expect(() => loadCurrentTurnFixture(new URL('./does-not-exist.json', import.meta.url))).toThrow(CurrentTurnFixtureError);
  });

  it('throws on text that is not JSON', () => {
    expect(() => parseCurrentTurnFixture('{"cases": [', 'inline')).toThrow(/not valid JSON/);
  });

  it('throws on a file with no cases', () => {
    expect(() => parseCurrentTurnFixture(file([]), 'inline')).toThrow(CurrentTurnFixtureError);
  });

  it('throws when an expected id names no turn of its case', () => {
    expect(() => parseCurrentTurnFixture(file([{ name: 'n', turns: [validTurn], expected_current_turn_id: 'nope' }]), 'inline')).toThrow(
      /no turn with id nope/,
    );
  });

  it('throws when a turn sets a prompt_dispatch_* key (D15)', () => {
    const turn = { ...validTurn, metadata: { prompt_dispatch_pending: true } };
    const cases = [
      { name: 'a', turns: [turn], expected_current_turn_id: 't1' },
      { name: 'b', turns: [], expected_current_turn_id: null },
    ];
    expect(() => parseCurrentTurnFixture(file(cases), 'inline')).toThrow(/prompt_dispatch_/);
  });

  it('throws on sub-microsecond or non-UTC timestamps', () => {
    for (const startedAt of ['2026-08-20T10:00:00.0000001Z', '2026-08-20T10:00:00+00:00']) {
      const cases = [
        { name: 'a', turns: [{ ...validTurn, started_at: startedAt }], expected_current_turn_id: 't1' },
        { name: 'b', turns: [], expected_current_turn_id: null },
      ];
      expect(() => parseCurrentTurnFixture(file(cases), 'inline')).toThrow(CurrentTurnFixtureError);
    }
  });

  it('throws when a turn omits completed_at instead of writing null', () => {
    const { completed_at: _omitted, ...turn } = validTurn;
    const cases = [
      { name: 'a', turns: [turn], expected_current_turn_id: 't1' },
      { name: 'b', turns: [], expected_current_turn_id: null },
    ];
    expect(() => parseCurrentTurnFixture(file(cases), 'inline')).toThrow(CurrentTurnFixtureError);
  });
});
