import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// docs/architecture.md is where a newcomer learns the layout: it must name what the tree holds
// today. Each list below is read from the code, so a new folder, store or port fails here until its
// line is written.
const ROOT = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(ROOT, 'src');
const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');

function foldersOf(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** Every name the first group of `pattern` captures in the TypeScript files under `dir`. */
function declaredNames(dir: string, pattern: RegExp): string[] {
  const names = sourceFiles(dir).flatMap((file) => [...readFileSync(file, 'utf8').matchAll(pattern)].map((match) => match[1]!));
  return [...new Set(names)].sort();
}

/** Every folder of src/ and every folder one level inside one, as `events/` or `repository/driver/`. */
const FOLDERS = foldersOf(SRC).flatMap((top) => [`${top}/`, ...foldersOf(path.join(SRC, top)).map((sub) => `${top}/${sub}/`)]);

/** The interfaces the repository's stores implement. */
const STORES = declaredNames(path.join(SRC, 'repository'), /^export interface (\w+Store)\b/gm);

/** The ports the NATS adapters implement. */
const PORTS = declaredNames(path.join(SRC, 'events'), /\bclass \w+ implements (\w+)/g);

const named = (text: string) => doc.includes(`\`${text}\``) || doc.includes(`\`src/${text}\``);

describe('docs/architecture.md', () => {
  it('finds the folders, stores and ports it checks (a scan that finds none would pass in silence)', () => {
    expect(FOLDERS).toEqual(expect.arrayContaining(['bin/', 'repository/', 'repository/driver/', 'services/']));
    expect(STORES).toEqual(expect.arrayContaining(['ProjectionStore']));
    expect(PORTS).toEqual(expect.arrayContaining(['SummaryPublisher']));
  });

  it.each(FOLDERS)('names the folder src/%s', (folder) => {
    expect(named(folder), `add a line for \`${folder}\` to docs/architecture.md's layout`).toBe(true);
  });

  it.each(STORES)('names the store %s', (store) => {
    expect(named(store), `add \`${store}\` to docs/architecture.md's stores and ports`).toBe(true);
  });

  it.each(PORTS)('names the port %s', (port) => {
    expect(named(port), `add \`${port}\` to docs/architecture.md's stores and ports`).toBe(true);
  });
});
