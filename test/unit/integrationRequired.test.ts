import { describe, expect, it } from 'vitest';
import { integrationRequired, isTruthyFlag } from '../support/services.js';

describe('integration mode from the environment', () => {
  it.each(['true', 'TRUE', '1', 'yes', 'on', 'github-actions', ' true '])('reads CI=%j as on', (value) => {
    expect(isTruthyFlag(value)).toBe(true);
    expect(integrationRequired({ CI: value })).toBe(true);
  });

  it.each(['', '0', 'false', 'False', 'no', 'off', ' 0 '])('reads CI=%j as off', (value) => {
    expect(isTruthyFlag(value)).toBe(false);
    expect(integrationRequired({ CI: value })).toBe(false);
  });

  it('is off when neither CI nor REQUIRE_INTEGRATION is set', () => {
    expect(isTruthyFlag(undefined)).toBe(false);
    expect(integrationRequired({})).toBe(false);
  });

  it('is on with REQUIRE_INTEGRATION=1 whatever CI says, and off with REQUIRE_INTEGRATION=0 alone', () => {
    expect(integrationRequired({ REQUIRE_INTEGRATION: '1' })).toBe(true);
    expect(integrationRequired({ CI: 'false', REQUIRE_INTEGRATION: '1' })).toBe(true);
    expect(integrationRequired({ REQUIRE_INTEGRATION: '0' })).toBe(false);
    expect(integrationRequired({ CI: 'yes', REQUIRE_INTEGRATION: '0' })).toBe(true);
  });
});
