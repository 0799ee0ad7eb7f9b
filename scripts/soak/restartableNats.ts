import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../test/support/freePort.js';

/**
 * A private nats-server with JetStream on a free loopback port and a store directory of its own,
 * which `restart()` stops (SIGTERM) and starts again on the same port and the same store, as an
 * operator's restart does: streams, consumers and their positions survive it. `stop()` removes the
 * store.
 */
export interface RestartableNats {
  readonly url: string;
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** SIGKILL at once, synchronously: the last resort of an exiting soak. */
  killNow(): void;
}

/** The nats-server binary: NATS_SERVER_BIN, the first on PATH, or Debian's; undefined when none. */
export function findNatsServer(): string | undefined {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  try {
    const found = execFileSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).trim();
    if (found) return found;
  } catch {
    // not on PATH
  }
  return existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : undefined;
}

export async function startRestartableNats(binary: string): Promise<RestartableNats> {
  const port = await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), 'pp-soak-nats-'));
  // nats-server has no flag for max_payload, and the worker refuses a server whose max_payload
  // cannot carry its largest message (ADR 0019): the shipped configuration's value, in a file
  // beside the store (removed with it).
  const configFile = join(storeDir, 'nats-server.conf');
  writeFileSync(configFile, 'max_payload: 8MB\n');
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    const proc = spawn(binary, ['-c', configFile, '-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`nats-server did not get ready in 20 s:\n${out}`)), 20_000);
      const onData = (d: Buffer) => {
        out += d.toString();
        if (out.includes('Server is ready')) {
          clearTimeout(timer);
          proc.stdout!.off('data', onData);
          proc.stderr!.off('data', onData);
          proc.stdout!.resume();
          proc.stderr!.resume();
          resolve();
        }
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited before it was ready:\n${out}`));
      });
    });
  };
  const halt = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  };

  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    async restart() {
      await halt();
      await start();
    },
    async stop() {
      await halt();
      rmSync(storeDir, { recursive: true, force: true });
    },
    killNow() {
      if (child && child.exitCode === null) child.kill('SIGKILL');
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
