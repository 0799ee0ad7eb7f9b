import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { largestMessages } from '../../src/contract/busLimits.js';
import { runCli } from '../support/cliProcess.js';
import { NATS_TEST_MAX_PAYLOAD, privateNatsAvailable, startPrivateNats, type PrivateNats } from '../support/privateNats.js';

// A nats-server as installed, with the default max_payload (1 MiB), and one with the shipped 8MB.
describe.skipIf(!privateNatsAvailable())('the worker refuses a NATS server whose max_payload cannot carry its largest message', () => {
  let small: PrivateNats;
  let shipped: PrivateNats;
  let dir: string;
  beforeAll(async () => {
    small = await startPrivateNats((storeDir) => `jetstream { store_dir: ${JSON.stringify(storeDir)} }\n`, {}, { maxPayload: 1024 * 1024 });
    shipped = await startPrivateNats((storeDir) => `jetstream { store_dir: ${JSON.stringify(storeDir)} }\n`, {});
    dir = mkdtempSync(join(tmpdir(), 'pp-max-payload-'));
  });
  afterAll(async () => {
    await small?.stop();
    await shipped?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const env = (natsUrl: string, extra: Record<string, string> = {}) => ({
    NATS_URL: natsUrl,
    DATABASE_URL: `sqlite:${join(dir, `w-${Math.random().toString(36).slice(2)}.db`)}`,
    HEALTH_PORT: '0',
    ...extra,
  });

  /** The one line a refusal prints: no stack, no log line, nothing else. */
  function oneLine(stderr: string): string {
    const lines = stderr.trim().split('\n');
    expect(lines, stderr).toHaveLength(1);
    expect(stderr).not.toMatch(/\n\s+at /);
    return lines[0]!;
  }

  it('exits 2 at start in one line naming max_payload, what it is, what the worker needs and for which limit', async () => {
    const run = await runCli(['worker'], env(small.url));
    expect(run.status, run.stderr).toBe(2);
    const line = oneLine(run.stderr);
    const [largest] = largestMessages({ queueMaxPerSession: 10 });
    expect(line).toMatch(/^pending-projector: the NATS server's max_payload is 1048576 bytes; the worker needs at least \d+ for MAX_EVENT_BYTES=7340032/);
    expect(line).toContain('Set max_payload in the nats-server configuration (e.g. max_payload: 8MB');
    // With MAX_EVENT_BYTES lowered, the limits themselves still need more than the server's 1 MiB.
    const lowered = await runCli(['worker'], env(small.url, { MAX_EVENT_BYTES: '65536' }));
    expect(lowered.status, lowered.stderr).toBe(2);
    expect(oneLine(lowered.stderr)).toContain(`needs at least ${largest!.bytes + 4096} for ${largest!.what}, JSON-escaped at worst`);
  });

  it('names QUEUE_MAX_PER_SESSION when the queue is the largest message, and MAX_EVENT_BYTES when it passes the server', async () => {
    const queue = await runCli(['worker'], env(shipped.url, { QUEUE_MAX_PER_SESSION: '1000' }));
    expect(queue.status, queue.stderr).toBe(2);
    expect(oneLine(queue.stderr)).toMatch(new RegExp(`max_payload is ${NATS_TEST_MAX_PAYLOAD} bytes.*a queue of 1000 entries \\(QUEUE_MAX_PER_SESSION\\)`));
    const events = await runCli(['worker'], env(shipped.url, { MAX_EVENT_BYTES: String(16 * 1024 * 1024) }));
    expect(events.status, events.stderr).toBe(2);
    expect(oneLine(events.stderr)).toMatch(/MAX_EVENT_BYTES=16777216, the largest event or request it takes \(or lower MAX_EVENT_BYTES\)/);
  });

  it('stops the sandbox with exit 2 and the same one line naming max_payload', async () => {
    const run = await runCli(['sandbox'], env(small.url));
    expect(run.status, run.stderr).toBe(2);
    expect(oneLine(run.stderr)).toMatch(
      /^pending-projector: the NATS server's max_payload is 1048576 bytes; .*Set max_payload in the nats-server configuration/,
    );
  });
});
