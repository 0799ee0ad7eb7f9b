import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPT = 'lint:links';

interface Outcome {
  status: number;
  stdout: string;
  stderr: string;
}

function npmRun(cwd: string): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', SCRIPT], { cwd, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ status, stdout, stderr });
    });
  });
}

/** A good little project: every link resolves, to a file, a folder, a heading here and one there. */
const GOOD: Record<string, string> = {
  'README.md': '# Intro\n\nSee [the guide](docs/guide.md#setting-up), [the docs](docs/) and [this](#intro).\n',
  'docs/guide.md': '# Guide\n\n## Setting up\n\nBack to [the readme](../README.md#intro).\n',
};

/**
 * Runs this repository's link check, its npm script and remark configuration unchanged, on a project
 * of the given files (node_modules linked to ours, so the same remark and plugin run).
 */
async function checkProject(files: Record<string, string>): Promise<Outcome & { rewritten: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'pp-links-'));
  dirs.push(dir);
  const ours = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'links-fixture', private: true, scripts: { [SCRIPT]: ours.scripts[SCRIPT] } }));
  await cp(join(ROOT, '.remarkrc.json'), join(dir, '.remarkrc.json'));
  await cp(join(ROOT, '.gitignore'), join(dir, '.gitignore'));
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  const outcome = await npmRun(dir);
  const rewritten: string[] = [];
  for (const [path, text] of Object.entries(files)) {
    if ((await readFile(join(dir, path), 'utf8')) !== text) rewritten.push(path);
  }
  return { ...outcome, rewritten };
}

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('the markdown link check (npm run lint:links)', () => {
  it('passes on the repository: every relative link and anchor in README.md and docs/ resolves', async () => {
    const outcome = await npmRun(ROOT);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
  });

  it('passes on a project whose links all resolve, and rewrites no file', async () => {
    const outcome = await checkProject(GOOD);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
    expect(outcome.stdout).toBe('');
    expect(outcome.rewritten).toEqual([]);
  });

  it('fails on a link to a missing file, naming it, and rewrites no file', async () => {
    const outcome = await checkProject({ ...GOOD, 'README.md': `${GOOD['README.md']}\nAnd [gone](docs/missing.md).\n` });
    expect(outcome.status).not.toBe(0);
    expect(outcome.stderr).toContain('docs/missing.md');
    expect(outcome.stdout).toBe('');
    expect(outcome.rewritten).toEqual([]);
  });

  // The plugin reports a missing anchor as a warning: --frail is what makes it fail the check.
  it('fails on an anchor that no heading makes, in the same file or in another', async () => {
    const outcome = await checkProject({
      'README.md': `${GOOD['README.md']}\nAlso [nowhere](#no-such-heading).\n`,
      'docs/guide.md': `${GOOD['docs/guide.md']}\nAnd [elsewhere](../README.md#not-a-heading-either).\n`,
    });
    expect(outcome.status).not.toBe(0);
    expect(outcome.stderr).toContain('#no-such-heading');
    expect(outcome.stderr).toContain('#not-a-heading-either');
    expect(outcome.rewritten).toEqual([]);
  });
});
