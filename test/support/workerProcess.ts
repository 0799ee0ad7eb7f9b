import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));
const FAILPOINT_WORKER = fileURLToPath(new URL('./failpointWorker.ts', import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  healthPort: number;
  output(): string;
  /** SIGTERM and wait for exit; resolves to the exit code. */
  stop(): Promise<number | null>;
  kill9(): Promise<void>;
}

/**
 * Starts `pending-projector worker` as a real process and waits until it logs that it started.
 * `options.failpoints` (`name=hang,...`) starts the same worker through the test-only entry that
 * arms them instead (failpointWorker.ts): the production CLI cannot.
 */
export async function spawnWorker(env: Record<string, string>, options: { failpoints?: string; timeoutMs?: number } = {}): Promise<WorkerProcess> {
  const { failpoints, timeoutMs = 30_000 } = options;
  const args = failpoints === undefined ? [CLI, 'worker'] : ['--import', 'tsx', FAILPOINT_WORKER, failpoints];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, HEALTH_PORT: '0', LOG_LEVEL: 'info', ACK_WAIT_MS: '2000', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const healthPort = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      // Not left running behind the failure: the caller never gets a handle to stop it.
      child.kill('SIGKILL');
      reject(new Error(`worker did not start in ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    const onData = () => {
      // A JSON line, or a LOG_FORMAT=pretty one, whose fields pino-pretty prints as JSON.
      const line = out.split('\n').find((l) => l.includes('"worker started"') || l.includes(') worker started {'));
      const port = line?.match(/"healthPort":(\d+)/)?.[1];
      if (port) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        resolve(Number(port));
      }
    };
    child.stdout!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited with ${code} before starting:\n${out}`));
    });
  });
  return {
    child,
    healthPort,
    output: () => out,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return exited;
    },
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}
