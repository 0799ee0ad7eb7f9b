import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SETTINGS, isSecretSetting, namesOf, type SettingName } from '../../src/config.js';

// docs/configuration.md is the one full list of settings; README shows a few and links to it.
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

/** The table rows of a document, by their first cell (an env name, or a command of README's command table). */
function rowsOf(doc: string): Map<string, string[]> {
  return new Map(
    doc
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => {
        const cells = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
        return [cells[1]!.replaceAll('`', ''), cells.slice(1)] as const;
      }),
  );
}

const rows = rowsOf(read('docs/configuration.md'));
const settingOf = new Map((Object.keys(SETTINGS) as SettingName[]).map((name) => [namesOf(name)[0]!.env, name]));

/** A default cell as the table's default: `value`, "empty" or "none" for '', "N days" in milliseconds. */
function documentedDefault(cell: string): string {
  if (cell === 'empty' || cell === 'none') return '';
  const days = /^(\d+) days$/.exec(cell);
  if (days) return String(Number(days[1]) * 86_400_000);
  return cell.replace(/^`(.*)`$/, '$1');
}

describe('docs/configuration.md', () => {
  it.each(Object.keys(SETTINGS) as SettingName[])('has a row for %s with its env name and flag', (name) => {
    const [own] = namesOf(name);
    const row = rows.get(own!.env);
    expect(row, `no row for ${own!.env}`).toBeDefined();
    expect(row![1]).toContain(`\`--${own!.flag}\``);
  });

  it('lists no setting the code does not have', () => {
    expect([...rows.keys()].filter((env) => !settingOf.has(env))).toEqual([]);
  });
});

describe.each(['docs/configuration.md', 'README.md'])('the defaults %s shows', (file) => {
  it("are the settings table's", () => {
    const shown = [...rowsOf(read(file))].filter(([env]) => settingOf.has(env));
    expect(shown.length).toBeGreaterThan(0);
    for (const [env, cells] of shown) {
      const name = settingOf.get(env)!;
      // A secret's default is never shown; every secret defaults to unset.
      const expected = isSecretSetting(name) ? '' : String(SETTINGS[name].default);
      expect(documentedDefault(cells[2]!), `${file}: the default of ${env}`).toBe(expected);
    }
  });
});
