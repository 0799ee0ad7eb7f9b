import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

/** This process's environment without the settings a child must not inherit by accident, under `env`. */
export function childEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'SUBJECT_PREFIX', 'HEALTH_PORT']) delete out[name];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete out[name];
    else out[name] = value;
  }
  return out;
}

export interface LongProcess {
  child: ChildProcess;
  stdout(): string;
  output(): string;
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /** Resolves once stdout matches `pattern`; rejects if the process exits first or `timeoutMs` passes. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `node <args>` from the repository's root (`pending-projector <args>` with `cli: true`). */
export function spawnLong(args: string[], env: NodeJS.ProcessEnv, options: { cli?: boolean } = {}): LongProcess {
  const child = spawn(process.execPath, options.cli ? [CLI, ...args] : args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let all = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    all += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => (all += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    output: () => all,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = out.match(pattern);
          if (!match) return false;
          clearTimeout(timer);
          child.stdout!.off('data', check);
          resolve(match);
          return true;
        };
        const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${all}`)), timeoutMs);
        if (check()) return;
        child.stdout!.on('data', check);
        void exited.then((code) => {
          if (!check()) {
            clearTimeout(timer);
            reject(new Error(`exited with ${code} before ${pattern}:\n${all}`));
          }
        });
      });
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** The words of a printed shell command line: bare words and single-quoted ones ('\'' inside). */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end === -1) throw new Error(`unbalanced quote in ${line}`);
      word = (word ?? '') + line.slice(i + 1, end);
      i = end;
    } else if (c === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line[++i];
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else word = (word ?? '') + c;
  }
  if (word !== undefined) words.push(word);
  return words;
}
