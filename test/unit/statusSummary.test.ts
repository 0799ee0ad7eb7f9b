import { describe, expect, it } from 'vitest';
import {
  canonicalSummaryJson,
  parseStoredSummary,
  pendingActionOf,
  semanticallyEqual,
  SummaryParseError,
  toPublishedSummary,
  withPendingAction,
} from '../../src/events/statusSummary.js';

describe('status summary model', () => {
  it('writes known fields in Kandev order, unknown fields after them, nested keys sorted', () => {
    const text = canonicalSummaryJson({ zeta: 1, git: { deletions: 1, additions: 2 }, pending_action: 'permission', last_activity_at: 'x' });
    expect(text).toBe('{"last_activity_at":"x","pending_action":"permission","git":{"additions":2,"deletions":1},"zeta":1}');
  });

  it('treats summaries that differ only in key order or transport fields as equal', () => {
    expect(semanticallyEqual({ a: { x: 1, y: 2 }, revision: 3 }, { a: { y: 2, x: 1 }, updated_at: 'later' })).toBe(true);
    expect(semanticallyEqual({ pending_action: 'permission' }, {})).toBe(false);
  });

  it('replaces only pending_action and omits it when empty', () => {
    const base = { git: { additions: 1 }, pending_action: 'clarification' };
    expect(withPendingAction(base, null)).toEqual({ git: { additions: 1 } });
    expect(withPendingAction(base, 'permission')).toEqual({ git: { additions: 1 }, pending_action: 'permission' });
    expect(base.pending_action).toBe('clarification');
  });

  it('drops transport fields when parsing and refuses anything but a JSON object', () => {
    expect(parseStoredSummary('{"revision":4,"updated_at":"t","pending_action":"permission"}')).toEqual({ pending_action: 'permission' });
    for (const bad of ['', 'garbage', '[]', 'null', '"x"']) expect(() => parseStoredSummary(bad)).toThrow(SummaryParseError);
  });

  it('reads only the two known pending actions', () => {
    expect(pendingActionOf({ pending_action: 'clarification' })).toBe('clarification');
    expect(pendingActionOf({ pending_action: 'something-else' })).toBeNull();
  });

  it('publishes revision and updated_at first, then the semantic fields', () => {
    expect(Object.keys(toPublishedSummary({ pending_action: 'permission', git: {} }, 5, 't'))).toEqual(['revision', 'updated_at', 'pending_action', 'git']);
  });
});
