import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const HOLDER = fileURLToPath(new URL('./admissionHolder.ts', import.meta.url));

export interface AdmissionProcess {
  readonly child: ChildProcess;
  /** Resolves once the process printed `line` (rejects if it exits first). */
  printed(line: string): Promise<void>;
  /** Asks it to release its lease; resolves to its exit code. */
  release(): Promise<number | null>;
  kill9(): Promise<void>;
  output(): string;
}

/** Starts test/support/admissionHolder.ts as a real process holding a lease (see its header). */
export function spawnAdmissionHolder(env: { DATABASE_URL: string; TASK_ID: string; CALLER_ID?: string; ADMISSION_LOCK_TIMEOUT_MS?: string }): AdmissionProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', HOLDER], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  const listeners = new Set<() => void>();
  const onOutput = (data: Buffer) => {
    out += data.toString();
    for (const listener of listeners) listener();
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    printed(line) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (out.split('\n').includes(line)) {
            listeners.delete(check);
            resolve();
          }
        };
        listeners.add(check);
        check();
        void exited.then((code) => {
          listeners.delete(check);
          if (!out.split('\n').includes(line)) reject(new Error(`admission holder exited with ${code} before printing ${line}:\n${out}`));
        });
      });
    },
    async release() {
      child.stdin!.write('release\n');
      return exited;
    },
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
    output: () => out,
  };
}
