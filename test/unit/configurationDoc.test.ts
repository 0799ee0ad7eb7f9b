import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SETTINGS, namesOf, type SettingName } from '../../src/config.js';

// docs/configuration.md is the one full list of settings; README shows a few and links to it.
const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
const rows = new Map(
  doc
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => [line.split('|')[1]!.trim().replaceAll('`', ''), line] as const),
);

describe('docs/configuration.md', () => {
  it.each(Object.keys(SETTINGS) as SettingName[])('has a row for %s with its env name and flag', (name) => {
    const [own] = namesOf(name);
    const row = rows.get(own!.env);
    expect(row, `no row for ${own!.env}`).toBeDefined();
    expect(row).toContain(`\`--${own!.flag}\``);
  });

  it('lists no setting the code does not have', () => {
    const known = new Set((Object.keys(SETTINGS) as SettingName[]).map((name) => namesOf(name)[0]!.env));
    expect([...rows.keys()].filter((env) => !known.has(env))).toEqual([]);
  });
});
