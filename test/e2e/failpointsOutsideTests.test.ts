import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cliProcess.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** README.md and every Markdown file under docs/, by path from the repository root. */
function documents(): string[] {
  const under = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? under(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
    );
  return ['README.md', ...under('docs')];
}

// A failpoint hangs a worker for good: one armed in production by a stray variable or flag would
// stop every prompt delivery. Only the test tree's own worker entry (test/support/failpointWorker.ts)
// can arm one, so the shipped CLI must know no way to.
describe('failpoints outside the test suite', () => {
  it('the worker refuses --failpoints as an unknown flag, exit 2, and starts nothing', async () => {
    const run = await runCli(['worker', '--failpoints', 'after_reserve=hang']);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^pending-projector: unknown flag --failpoints for worker[;( ]/);
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(run.stdout).toBe('');
  });

  it("the worker's --help names no failpoint setting", async () => {
    const run = await runCli(['worker', '--help']);
    expect(run.status).toBe(0);
    expect(run.stdout).not.toMatch(/failpoint/i);
  });

  it('no document lists the old variable or flag', () => {
    const listing = documents().filter((file) => /PENDING_PROJECTOR_FAILPOINTS|--failpoints/.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(listing).toEqual([]);
  });
});
