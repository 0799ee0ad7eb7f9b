import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { topologyFor } from '../../src/contract/subjects.js';
import { runCli } from '../support/cliProcess.js';
import { eventually } from '../support/nats.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));
// tsx and esbuild each load, and the page is bundled, on a busy 2-core host before the URL is printed.
const START_MS = 60_000;

describe('pending-projector console', () => {
  it('serves the page, its bundle, its stylesheet and /config.json, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [CLI, 'console', '--console-port', '0', '--console-nats-url', 'ws://127.0.0.1:18080', '--subject-prefix', 'acme.'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    try {
      const url = await eventually(() => /console: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1], START_MS, `the console's URL:\n${out}`);

      const page = await fetch(url);
      expect([page.status, page.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
      const html = await page.text();
      for (const selector of ['id="connection"', 'id="nav"', 'id="board"', 'id="login"', 'src="console.js"']) expect(html).toContain(selector);

      const script = await fetch(new URL('console.js', url));
      expect([script.status, script.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8']);
      // The bundle carries the browser's NATS client: a page that imports no connection would load empty.
      expect(await script.text()).toContain('pending-projector-console');

      const css = await fetch(new URL('console.css', url));
      expect([css.status, css.headers.get('content-type')]).toEqual([200, 'text/css; charset=utf-8']);

      const config = await fetch(new URL('config.json', url));
      expect([config.status, config.headers.get('content-type')]).toEqual([200, 'application/json; charset=utf-8']);
      expect(await config.json()).toEqual({ natsUrl: 'ws://127.0.0.1:18080', subjectPrefix: 'acme.', bucket: topologyFor('acme.').summaryBucket });

      expect((await fetch(new URL('nothing-here', url))).status).toBe(404);
      expect((await fetch(url, { method: 'POST' })).status).toBe(405);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, out).toEqual({ code: 0, signal: null });
  });

  it('exits 2 naming CONSOLE_PORT when its port is taken, and refuses a NATS URL the browser cannot open', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const busy = await runCli(['console', '--console-port', String(port)]);
      expect([busy.status, busy.stderr]).toEqual([2, expect.stringContaining('CONSOLE_PORT')]);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
    const refused = await runCli(['console'], { CONSOLE_NATS_URL: 'nats://127.0.0.1:4222' });
    expect([refused.status, refused.stderr]).toEqual([2, expect.stringContaining('CONSOLE_NATS_URL / --console-nats-url')]);
  });
});
