import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliOutcome } from '../support/cliProcess.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';

// Nothing listens on port 1: a refused connection, at once, on either service.
const DEAD_NATS = 'nats://ops:nats-s3cret@127.0.0.1:1';
const DEAD_PG = 'postgres://postgres:pg-s3cret@127.0.0.1:1/test';

/** The one line a failed connection prints: the setting, the masked address, no stack, no secret. */
function expectOneLine(run: CliOutcome, setting: 'NATS_URL' | 'DATABASE_URL', address: string, status: number): void {
  expect(run.status, run.stderr).toBe(status);
  const line = run.stderr.trimEnd();
  expect(line.split('\n')).toHaveLength(1);
  expect(line).toContain(`(${setting} / --${setting.toLowerCase().replace('_', '-')})`);
  expect(line).toContain(address);
  expect(line).toMatch(/\. [A-Z][a-z]+ /); // then what to check or do
  expect(line).not.toMatch(/^\s+at /m);
  expect(run.stdout + run.stderr).not.toMatch(/s3cret/);
}

describe('a service that cannot be reached, through each command that connects', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('sqlite', undefined, { file: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  const natsAddress = 'nats://ops:[REDACTED]@127.0.0.1:1';
  const pgAddress = 'postgres://postgres:[REDACTED]@127.0.0.1:1/test';

  it.each([
    ['worker', ['worker']],
    ['reconcile', ['reconcile']],
    ['replay', ['replay', '--from-seq', '1']],
    ['dead-letters', ['dead-letters', 'list']],
  ])('%s names NATS_URL and its address in one line, and exits 3', async (_name, args) => {
    expectOneLine(await runCli(args, { NATS_URL: DEAD_NATS, DATABASE_URL: t.url, HEALTH_PORT: '0' }), 'NATS_URL', natsAddress, 3);
  });

  it.each([
    ['worker', ['worker']],
    ['migrate', ['migrate']],
    ['verify', ['verify']],
    ['reconcile', ['reconcile']],
    ['replay', ['replay', '--from-seq', '1']],
  ])('%s names DATABASE_URL and its address in one line, and exits 3', async (_name, args) => {
    expectOneLine(await runCli(args, { DATABASE_URL: DEAD_PG, NATS_URL: DEAD_NATS, HEALTH_PORT: '0' }), 'DATABASE_URL', pgAddress, 3);
  });

  it('doctor names DATABASE_URL in the same one line, and exits 3 with its report', async () => {
    const run = await runCli(['doctor'], { DATABASE_URL: DEAD_PG });
    expect(run.status).toBe(3);
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain(`cannot reach the database at ${pgAddress} (DATABASE_URL / --database-url)`);
    expect(run.stdout).toMatch(/verdict: /);
    expect(run.stdout + run.stderr).not.toMatch(/s3cret/);
  });

  it('names a database that does not exist as a configuration error, exit 2', async () => {
    const run = await runCli(['migrate'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/pp_no_such_database' });
    expectOneLine(run, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/pp_no_such_database', 2);
    expect(run.stderr).toContain('does not exist');
  });

  it('shows the stack only at LOG_LEVEL=debug', async () => {
    const run = await runCli(['dead-letters', 'list'], { NATS_URL: DEAD_NATS, LOG_LEVEL: 'debug' });
    expect(run.status).toBe(3);
    expect(run.stderr.split('\n')[0]).toContain('(NATS_URL / --nats-url)');
    expect(run.stderr).toMatch(/^\s+at /m);
    expect(run.stderr).not.toMatch(/s3cret/);
  });

  it('checks DATABASE_URL before connecting to NATS: a bad sslmode is a configuration error while NATS is down', async () => {
    const run = await runCli(['worker'], { NATS_URL: DEAD_NATS, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test?sslmode=bogus', HEALTH_PORT: '0' });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('sslmode=bogus is not supported');
    expect(run.stderr).not.toMatch(/ECONNREFUSED|cannot reach/);
  });

  it('lists bad NATS and DATABASE_URL settings together, before any connection', async () => {
    const run = await runCli(['reconcile'], { NATS_URL: 'http://127.0.0.1:1', DATABASE_URL: 'mysql://db/k' });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('scheme "http" is not nats:// or tls://');
    expect(run.stderr).toContain('unsupported DATABASE_URL');
  });
});
