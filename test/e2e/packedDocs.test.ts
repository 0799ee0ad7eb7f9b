import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// The README is the package's front page, and its links must lead somewhere for whoever installed
// it. The build (prepack) is skipped: no markdown links into dist/, and it costs a minute here.
describe('the packed package', () => {
  let dir: string;
  let unpacked: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pp-packed-docs-'));
    await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir, '--silent'], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
    const [tarball] = (await readdir(dir)).filter((name) => name.endsWith('.tgz'));
    await run('tar', ['-xzf', join(dir, tarball!), '-C', dir]);
    unpacked = join(dir, 'package');
  }, 120_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ships the documentation the README links to', async () => {
    const docs = await readdir(join(unpacked, 'docs'));
    expect(docs).toEqual(expect.arrayContaining(['configuration.md', 'endpoints.md', 'schema.md', 'security.md', 'decisions']));
  });

  // The same checker and configuration as `npm run lint:links`, run inside the unpacked package:
  // a link to a file the package leaves out is a missing file there.
  it('has no relative link or anchor, in the README or any packed markdown, that leads outside the package', async () => {
    const remark = join(ROOT, 'node_modules', '.bin', 'remark');
    const outcome = await run(remark, ['--rc-path', join(ROOT, '.remarkrc.json'), '--frail', '--quiet', '--no-stdout', '.'], {
      cwd: unpacked,
      env: { ...process.env, NO_COLOR: '1' },
    }).then(
      ({ stderr }) => ({ status: 0, stderr }),
      (err: { code?: number; stderr?: string }) => ({ status: err.code ?? 1, stderr: err.stderr ?? String(err) }),
    );
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
  }, 60_000);
});
