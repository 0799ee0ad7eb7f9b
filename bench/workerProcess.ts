/**
 * The worker under test for the latency levels (4) and the memory measurement (6), in a process of
 * its own, as deployed: its latency and its RSS are then the worker's alone, sharing no event loop
 * or heap with the benchmark's publisher, nor what seeding and earlier phases left in the
 * allocator. bench/worker.ts forks this file and talks to it over the IPC channel:
 *
 *   parent -> child  { cmd: 'settled' }  -> { settled, rss }            events settled so far, RSS now
 *   parent -> child  { cmd: 'sample' }   -> { settled, memory }         after global.gc(), twice
 *   parent -> child  { cmd: 'trace' }    -> { trace }                   --diagnose: GCs and event-loop stalls since the last ask
 *   parent -> child  { cmd: 'stop' }     -> { stopped: true }, then the process exits
 *   child  -> parent { ready: true } once the worker consumes, or { error } when it cannot start
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connectNats } from '../src/bin/connectNats.js';
import { silentLogger } from '../src/logger.js';
import { createDatabase } from '../src/repository/database.js';
import type { WorkerConfig } from '../src/bin/worker.js';
import { startWorker } from '../src/bin/worker.js';
import { startProcessTrace, type ProcessTrace } from './diagnostics/processTrace.js';

export interface WorkerProcessOptions {
  databaseUrl: string;
  searchPath?: string;
  maxConnections?: number;
  natsUrl: string;
  config: WorkerConfig;
  /** Record the process's GCs and event-loop stalls for `trace()` (--diagnose). */
  diagnose?: boolean;
}

export interface MemorySample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

type Reply = { settled?: number; rss?: number; memory?: MemorySample; trace?: ProcessTrace; stopped?: boolean; ready?: boolean; error?: string };

/** The parent's handle on a forked worker process. */
export class WorkerProcess {
  private waiting: Array<(reply: Reply) => void> = [];
  private readonly exited: Promise<number | null>;

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (reply: Reply) => this.waiting.shift()?.(reply));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  static async start(options: WorkerProcessOptions): Promise<WorkerProcess> {
    const child = fork(fileURLToPath(import.meta.url), [JSON.stringify(options)], {
      execArgv: ['--expose-gc', '--import', 'tsx'],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const handle = new WorkerProcess(child);
    const first = await Promise.race([handle.next(), handle.exited.then((code) => ({ error: `worker process exited with ${code}` }) as Reply)]);
    if (!first.ready) {
      child.kill();
      throw new Error(`worker process did not start: ${first.error ?? JSON.stringify(first)}`);
    }
    return handle;
  }

  /** The worker process's pid (the benches read its CPU time from /proc). */
  get pid(): number {
    return this.child.pid!;
  }

  private next(): Promise<Reply> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private async ask(cmd: string): Promise<Reply> {
    const reply = this.next();
    this.child.send({ cmd });
    const answer = await Promise.race([reply, this.exited.then((code) => ({ error: `worker process exited with ${code}` }) as Reply)]);
    if (answer.error) throw new Error(answer.error);
    return answer;
  }

  async settled(): Promise<{ settled: number; rss: number }> {
    const reply = await this.ask('settled');
    return { settled: reply.settled!, rss: reply.rss! };
  }

  async sample(): Promise<{ settled: number; memory: MemorySample }> {
    const reply = await this.ask('sample');
    return { settled: reply.settled!, memory: reply.memory! };
  }

  /** The worker process's garbage collections and event-loop stalls since the last call (or its start); empty unless started with `diagnose`. */
  async trace(): Promise<ProcessTrace> {
    return (await this.ask('trace')).trace!;
  }

  /** Stops the worker gracefully and waits for the process to exit. Idempotent. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    await this.ask('stop').catch(() => undefined);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    await this.exited;
    clearTimeout(timer);
  }
}

async function runChild(options: WorkerProcessOptions): Promise<void> {
  const send = (reply: Reply) => process.send!(reply);
  const db = createDatabase(options.databaseUrl, { searchPath: options.searchPath, maxConnections: options.maxConnections });
  const nc = await connectNats({ natsUrl: options.natsUrl }, 'bench-worker-process');
  const worker = await startWorker({ db, nc, config: options.config, logger: silentLogger() });
  const settled = async () => (await worker.metrics.events.get()).values.reduce((sum, v) => (v.labels.outcome === 'retried' ? sum : sum + v.value), 0);
  const gc = (globalThis as { gc?: () => void }).gc;
  const tracing = options.diagnose ? startProcessTrace() : undefined;
  process.on('message', (message: { cmd: string }) => {
    void (async () => {
      try {
        if (message.cmd === 'settled') send({ settled: await settled(), rss: process.memoryUsage.rss() });
        else if (message.cmd === 'sample') {
          gc?.();
          await new Promise((resolve) => setTimeout(resolve, 50));
          gc?.();
          const m = process.memoryUsage();
          send({ settled: await settled(), memory: { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external } });
        } else if (message.cmd === 'trace') {
          // The GC observer reports asynchronously: let the last collections arrive.
          await new Promise((resolve) => setImmediate(resolve));
          send({ trace: tracing?.take() ?? { gc: [], stalls: [] } });
        } else if (message.cmd === 'stop') {
          await worker.stop();
          await nc.drain();
          await db.destroy();
          send({ stopped: true });
          process.disconnect();
        }
      } catch (err) {
        send({ error: (err as Error).message });
      }
    })();
  });
  send({ ready: true });
}

if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  runChild(JSON.parse(process.argv[2]!) as WorkerProcessOptions).catch((err: Error) => {
    process.send!({ error: `${err.name}: ${err.message}` });
    process.exitCode = 1;
    process.disconnect();
  });
}
