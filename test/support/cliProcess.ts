import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

export interface CliOutcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `pending-projector <args>` as a real process with `env` over this one's (logs at warn; an
 * undefined value unsets a variable), in
 * `options.cwd` when given (where a relative path, such as the default database's, would land).
 */
export function runCli(args: string[], env: Record<string, string | undefined> = {}, options: { cwd?: string } = {}): Promise<CliOutcome> {
  // An undefined value unsets the variable (an empty one would be a setting of its own).
  const merged = Object.fromEntries(Object.entries({ ...process.env, LOG_LEVEL: 'warn', ...env }).filter(([, value]) => value !== undefined));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: merged, cwd: options.cwd });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}
