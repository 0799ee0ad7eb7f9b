import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

export interface CliOutcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `pending-projector <args>` as a real process with `env` over this one's (logs at warn). */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<CliOutcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}
