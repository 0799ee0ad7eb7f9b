import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cliProcess.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, natsUrl, uniquePrefix } from '../support/nats.js';
import { rowWriter } from '../support/rowWriters.js';

describe('what the CLI says to a person', () => {
  it('names the closest flag of a typo in one line, exit 2, without the help', async () => {
    const run = await runCli(['migrate', '--add-index']);
    expect(run.status).toBe(2);
    expect(run.stderr).toBe('pending-projector: unknown flag --add-index for migrate; did you mean --add-indexes? (see pending-projector migrate --help)\n');
    expect(run.stdout).toBe('');
  });

  it('names the closest command of a typo in one line, exit 2', async () => {
    const run = await runCli(['migrat']);
    expect(run.status).toBe(2);
    expect(run.stderr).toBe('pending-projector: unknown command "migrat"; did you mean migrate? (see pending-projector --help)\n');
  });

  it('says a flag without its value, or an argument a command does not take, in one line, exit 2', async () => {
    for (const args of [
      ['migrate', '--database-url'],
      ['verify', 'extra'],
      ['doctor', '--json=1'],
      ['verify', '--nats-url', 'x'],
    ]) {
      const run = await runCli(args);
      expect(run.status, args.join(' ')).toBe(2);
      expect(run.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(run.stderr).toContain(`(see pending-projector ${args[0]} --help)`);
      expect(run.stderr).not.toMatch(/To specify a positional/);
    }
  });

  it('lists a bad setting without dumping the help after it', async () => {
    const run = await runCli(['migrate'], { SCHEMA_MODE: 'sideways' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/SCHEMA_MODE \/ --schema-mode = "sideways"/);
    expect(run.stderr).not.toMatch(/Flags and environment/);
  });

  it('wraps every --help to 100 columns', async () => {
    for (const command of [[], ['migrate'], ['doctor'], ['worker'], ['reconcile'], ['verify'], ['replay'], ['dead-letters'], ['console']]) {
      const run = await runCli([...command, '--help']);
      expect(run.status).toBe(0);
      const longest = Math.max(...run.stdout.split('\n').map((line) => line.length));
      expect(longest, command.join(' ')).toBeLessThanOrEqual(100);
    }
  });

  it('says what dead-letters show lacks, not "got undefined"', async () => {
    const missing = await runCli(['dead-letters', 'show']);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('none was given');
    expect(missing.stderr).not.toContain('undefined');
    const notANumber = await runCli(['dead-letters', 'retry', 'abc']);
    expect(notANumber.stderr).toContain('"abc" is not one');
  });
});

describe('the one-shot commands report once, on the right stream', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;
  beforeAll(async () => {
    t = await openTestDatabase('sqlite', undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix('cli_messages');
    const w = rowWriter('owned', t.ctx);
    const { sessionId } = await w.session();
    await w.bundle({ sessionId, turnId: await w.turnAt(sessionId, { startedAt: new Date().toISOString() }) });
  });
  afterAll(async () => {
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('verify says its one-task summary once, in the singular', async () => {
    const run = await runCli(['verify', '--database-url', t.url]);
    expect(run.status).toBe(1);
    expect(run.stderr).toBe('verified 1 task: 1 drifted\n');
  });

  it('reconcile and replay keep stdout for their summary: logs go to stderr', async () => {
    const env = { DATABASE_URL: t.url, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, LOG_LEVEL: 'info' };
    const reconciled = await runCli(['reconcile'], env);
    expect(reconciled.status, reconciled.stderr).toBe(0);
    expect(reconciled.stdout).toMatch(/^reconciled 1 task in [\d.]+ s: 1 drifted, 1 repaired, 0 failed\n$/);
    expect(reconciled.stderr).toMatch(/"level":30/);
    const replayed = await runCli(['replay', '--from-seq', '1'], env);
    expect(replayed.stdout).not.toMatch(/"level"/);
    expect(replayed.stdout.trimEnd().split('\n')).toHaveLength(1);
  });
});
