import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireSqliteWorkerLock, SqliteWorkerLockedError, type SqliteWorkerLock } from '../../src/repository/sqliteWorkerLock.js';

const LOCK_MODULE = fileURLToPath(new URL('../../src/repository/sqliteWorkerLock.ts', import.meta.url));
const cleanups: Array<() => unknown> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function scratchFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-lock-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'pending-projector.db');
}

function take(file: string): Promise<SqliteWorkerLock> {
  return acquireSqliteWorkerLock(file).then((lock) => {
    cleanups.push(() => lock.release());
    return lock;
  });
}

/** Another process that takes the lock on `file`, says "held", and keeps it until killed. */
async function holdInChild(file: string) {
  const script = `const { acquireSqliteWorkerLock } = await import(${JSON.stringify(LOCK_MODULE)});
await acquireSqliteWorkerLock(${JSON.stringify(file)});
process.stdout.write('held\\n');
setInterval(() => undefined, 1000);`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(() => child.kill('SIGKILL'));
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('held')) resolve();
    });
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    void exited.then(() => reject(new Error(`the holder exited before taking the lock:\n${out}`)));
  });
  return { pid: child.pid!, kill9: async () => (child.kill('SIGKILL'), exited) };
}

describe('the SQLite worker lock', () => {
  it('refuses a second holder in the same process, naming the first, and is free again once released', async () => {
    const file = scratchFile();
    const first = await take(file);
    const refused = await acquireSqliteWorkerLock(file).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(SqliteWorkerLockedError);
    const error = refused as SqliteWorkerLockedError;
    expect(error.holder).toMatchObject({ pid: process.pid, host: os.hostname() });
    expect(error.message).toContain(`worker pid ${process.pid} on ${os.hostname()}`);
    expect(error.message).toContain('one worker process per SQLite file');
    expect(error.code).toBe('SQLITE_WORKER_LOCKED');
    first.release();
    first.release();
    const second = await take(file);
    expect(second.lockFile).toBe(`${file}.worker-lock`);
  });

  it('refuses while another process holds it, naming that process, and is free once that process is killed with SIGKILL', async () => {
    const file = scratchFile();
    const holder = await holdInChild(file);
    await expect(acquireSqliteWorkerLock(file)).rejects.toMatchObject({ holder: { pid: holder.pid } });
    await holder.kill9();
    const lock = await take(file);
    expect(fs.existsSync(lock.lockFile)).toBe(true);
  });

  it('lets exactly one of many simultaneous takers hold it', async () => {
    const file = scratchFile();
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => acquireSqliteWorkerLock(file)));
    const held = outcomes.filter((o): o is PromiseFulfilledResult<SqliteWorkerLock> => o.status === 'fulfilled');
    for (const lock of held) cleanups.push(() => lock.value.release());
    expect(held).toHaveLength(1);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(SqliteWorkerLockedError);
  });
});
