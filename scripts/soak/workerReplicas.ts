import { spawnWorker, type WorkerProcess } from '../../test/support/workerProcess.js';

/**
 * The soak's worker replicas: `pending-projector worker` processes on one database and one bus,
 * each connecting to PostgreSQL with an `application_name` of its own (`<appPrefix><index>`), so
 * terminating "the workers' backends" never touches another client of the server.
 */
export interface WorkerReplicas {
  readonly count: number;
  /** Whether replica `index` is running (false between a kill and its restart). */
  isUp(index: number): boolean;
  /** SIGKILL replica `index`; `restart` brings it back. */
  kill9(index: number): Promise<void>;
  restart(index: number): Promise<void>;
  /** Replicas that exited without being killed by the soak: their last output, for the report. */
  unexpectedExits(): string[];
  /** SIGTERM every replica; resolves to the exit codes. */
  stopAll(): Promise<Array<number | null>>;
  /** SIGKILL every replica at once, synchronously: the last resort of an exiting soak. */
  killNow(): void;
}

export async function startWorkerReplicas(options: {
  count: number;
  databaseUrl: string;
  natsUrl: string;
  prefix: string;
  appPrefix: string;
  env: Record<string, string>;
}): Promise<WorkerReplicas> {
  const processes: Array<WorkerProcess | undefined> = [];
  const killed = new Set<WorkerProcess>();
  const crashes: string[] = [];
  const start = async (index: number) => {
    const separator = options.databaseUrl.includes('?') ? '&' : '?';
    const worker = await spawnWorker(
      {
        DATABASE_URL: `${options.databaseUrl}${separator}application_name=${options.appPrefix}${index}`,
        NATS_URL: options.natsUrl,
        SUBJECT_PREFIX: options.prefix,
        ...options.env,
      },
      { timeoutMs: 60_000 },
    );
    worker.child.once('exit', (code, signal) => {
      if (!killed.has(worker) && code !== 0) crashes.push(`replica ${index} exited (code ${code}, signal ${signal}):\n${worker.output().slice(-4000)}`);
    });
    processes[index] = worker;
  };
  // One after the other: two first starts would race to create the same streams.
  for (let i = 0; i < options.count; i++) await start(i);
  return {
    count: options.count,
    isUp: (index) => processes[index] !== undefined,
    async kill9(index) {
      const worker = processes[index];
      if (!worker) return;
      processes[index] = undefined;
      killed.add(worker);
      await worker.kill9();
    },
    async restart(index) {
      if (!processes[index]) await start(index);
    },
    unexpectedExits: () => [...crashes],
    killNow() {
      for (const w of processes) if (w && w.child.exitCode === null) w.child.kill('SIGKILL');
    },
    async stopAll() {
      const running = processes.filter((w): w is WorkerProcess => w !== undefined);
      for (const w of running) killed.add(w);
      return Promise.all(running.map((w) => w.stop()));
    },
  };
}
