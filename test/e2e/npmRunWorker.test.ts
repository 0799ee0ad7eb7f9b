import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectTestNats, deleteTopology, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { isRunning, processGroup, type ProcessEntry } from '../support/processGroup.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// npm, tsx and the worker each load on a busy 2-core host before the worker is ready.
const START_MS = 60_000;

interface NpmRun {
  npm: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  healthPort: number;
  output(): string;
}

const prefixes: string[] = [];
const groups: number[] = [];

/**
 * `npm run worker` as a user runs it: in a process group of its own, as a terminal's job is, with a
 * temporary SQLite file, a free health port and a prefix of its own.
 */
async function npmRunWorker(dir: string): Promise<NpmRun> {
  const prefix = uniquePrefix('npmrun');
  prefixes.push(prefix);
  const npm = spawn('npm', ['run', 'worker'], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      DATABASE_URL: `sqlite:${join(dir, `${prefix}db`)}`,
      NATS_URL: natsUrl(),
      SUBJECT_PREFIX: prefix,
      HEALTH_PORT: '0',
      LOG_LEVEL: 'info',
    },
  });
  groups.push(npm.pid!);
  let out = '';
  npm.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  npm.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    npm.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const started = await eventually(
    () => out.split('\n').find((line) => line.includes('"worker started"')),
    START_MS,
    `"worker started" from npm run worker:\n${out}`,
  );
  const healthPort = (JSON.parse(started) as { healthPort: number }).healthPort;
  await eventually(async () => ((await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status === 200 ? true : undefined), START_MS, 'readyz');
  return { npm, exited, healthPort, output: () => out };
}

const serving = (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then(
    () => true,
    () => false,
  );

/** The worker among the processes npm started: the one that runs the CLI's worker command. */
function workerOf(tree: ProcessEntry[]): ProcessEntry {
  const workers = tree.filter((p) => p.command.includes('src/bin/cli.ts worker') && !p.command.startsWith('sh '));
  expect(workers.length, JSON.stringify(tree)).toBeGreaterThan(0);
  return workers[workers.length - 1]!;
}

describe('npm run worker', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pp-npm-run-'));
  });

  afterEach(() => {
    // Whatever a failed case left running goes with its group.
    for (const pgid of groups.splice(0)) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  afterAll(async () => {
    const nc = await connectTestNats();
    for (const prefix of prefixes) await deleteTopology(nc, prefix);
    await nc.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'stops cleanly on %s to npm: npm exits 0 and no process of the run is left',
    async (signal) => {
      const run = await npmRunWorker(dir);
      const tree = processGroup(run.npm.pid!);
      const worker = workerOf(tree);

      process.kill(run.npm.pid!, signal);

      expect(await run.exited, run.output()).toEqual({ code: 0, signal: null });
      await eventually(() => (tree.every((p) => !isRunning(p.pid)) ? true : undefined), 10_000, `every process of ${JSON.stringify(tree)} to exit`);
      expect(isRunning(worker.pid)).toBe(false);
      expect(processGroup(run.npm.pid!)).toEqual([]);
      expect(await serving(run.healthPort)).toBe(false);
      expect(run.output()).toContain('"worker stopped"');
    },
    2 * START_MS,
  );

  // A terminal's Ctrl-C signals the whole foreground group: npm forwards its SIGINT to the worker,
  // which also got its own, and the two together are still one request to stop.
  it(
    'stops cleanly on Ctrl-C in a terminal (SIGINT to the whole process group)',
    async () => {
      const run = await npmRunWorker(dir);
      const tree = processGroup(run.npm.pid!);

      process.kill(-run.npm.pid!, 'SIGINT');

      expect(await run.exited, run.output()).toEqual({ code: 0, signal: null });
      await eventually(() => (processGroup(run.npm.pid!).length === 0 ? true : undefined), 10_000, `every process of ${JSON.stringify(tree)} to exit`);
      expect(await serving(run.healthPort)).toBe(false);
      expect(run.output()).toContain('"worker stopped"');
      expect(run.output()).not.toContain('second signal');
    },
    2 * START_MS,
  );
});
