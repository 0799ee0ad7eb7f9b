import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packIntoScratch, run, type PackedScratch } from '../support/packedScratch.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Packing builds dist/ (prepack) and installing resolves ~265 packages; on a busy 2-core host both
// together have taken over a minute.
const SLOW_MS = 5 * 60_000;

/** What a consumer's ESM program sees; printed as one JSON line. */
const CONSUMER_SCRIPT = `
import { createRequire } from 'node:module';
import * as root from 'pending-projector';
import { newestDurableTurnId } from 'pending-projector/turns';

const turns = [
  { id: 'open', started_at: '2026-11-30T10:00:00Z', created_at: '2026-11-30T10:00:00Z', metadata: {} },
  { id: 'boot', started_at: '2026-11-30T10:05:00Z', created_at: '2026-11-30T10:05:00Z', completed_at: '2026-11-30T10:05:00Z', metadata: { lifecycle_only: true } },
  { id: 'done', started_at: '2026-11-30T10:06:00Z', created_at: '2026-11-30T10:06:00Z', completed_at: '2026-11-30T10:07:00Z', metadata: {} },
];
const loaded = Object.keys(createRequire(import.meta.url).cache);
console.log(JSON.stringify({
  createPendingProjectorClient: typeof root.createPendingProjectorClient,
  rootReexportsTurns: root.newestDurableTurnId === newestDurableTurnId,
  current: newestDurableTurnId(turns),
  onlyLifecycle: newestDurableTurnId([turns[1]]),
  notLoaded: String(newestDurableTurnId(undefined)),
  nativeAddons: loaded.filter((path) => path.endsWith('.node')),
}));
`;

describe('the packed package', () => {
  let dir: string;
  let tarball: string;
  let scratch: string;

  beforeAll(async () => {
    let install: PackedScratch['install'];
    ({ dir, tarball, scratch, install } = await packIntoScratch(ROOT, 'pending-projector-pack'));
    // --ignore-scripts skips compiling better-sqlite3 (over a minute here), which neither entry
    // point loads: the consumer script asserts that no native addon was loaded, so the imports
    // run exactly as they would after a full install.
    await install(['--ignore-scripts', '--loglevel=error', tarball]);
  }, SLOW_MS);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ships the built entry points, the CLI and the docs, and no tests or benchmarks', async () => {
    const { stdout } = await run('tar', ['-tzf', tarball], { maxBuffer: 64 * 1024 * 1024 });
    const files = stdout
      .split('\n')
      .filter(Boolean)
      .map((path) => path.replace(/^package\//, ''));
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'bin/pending-projector.js',
        'src/bin/cli.ts',
        'dist/src/index.js',
        'dist/src/index.d.ts',
        'dist/src/turns/index.js',
        'dist/src/turns/index.d.ts',
        'docs/configuration.md',
      ]),
    );
    // docs/, deploy/ and the shared fixture in testdata/ ship: the README links them.
    expect(files.filter((path) => /^(test|bench|scripts)\//.test(path) || /\.test\.[cm]?[jt]s$/.test(path))).toEqual([]);

    const installed = join(scratch, 'node_modules', 'pending-projector');
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as { exports: Record<string, Record<string, string>> };
    const targets = Object.values(manifest.exports).flatMap((conditions) => Object.values(conditions));
    expect(targets.filter((target) => !existsSync(join(installed, target)))).toEqual([]);
  });

  it("lets an ESM program import 'pending-projector' and 'pending-projector/turns'", async () => {
    await writeFile(join(scratch, 'consumer.mjs'), CONSUMER_SCRIPT);
    const { stdout } = await run(process.execPath, ['consumer.mjs'], { cwd: scratch });
    expect(JSON.parse(stdout.trim())).toEqual({
      createPendingProjectorClient: 'function',
      rootReexportsTurns: true,
      current: 'open',
      onlyLifecycle: null,
      notLoaded: 'undefined',
      nativeAddons: [],
    });
  });

  it('installs a pending-projector command that prints its usage', async () => {
    const { stdout } = await run(join(scratch, 'node_modules', '.bin', 'pending-projector'), ['--help'], { cwd: scratch });
    expect(stdout).toMatch(/^Usage: pending-projector <command>/);
    expect(stdout).toContain('worker');
  });
});
