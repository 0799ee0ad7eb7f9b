import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const require = createRequire(import.meta.url);

// Runs in the thread. Plain CommonJS, evaluated by Node itself, so it needs no TypeScript loader
// (tsx, vitest) there; the driver is passed as a resolved path, so the cwd does not matter.
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.filename, { fileMustExist: true });
db.pragma('busy_timeout = 0');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch (err) {
    // Another process's checkpoint or exclusive lock: the next tick tries again.
    if (err.code !== 'SQLITE_BUSY' && err.code !== 'SQLITE_LOCKED') throw err;
  }
}, workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

export interface SqliteCheckpointer {
  /** False once the thread has exited; the connection must then checkpoint by itself again. */
  readonly running: boolean;
  /** Stops the thread (idempotent). */
  stop(): Promise<void>;
}

export interface SqliteCheckpointerOptions {
  filename: string;
  /** How often the thread checkpoints what the WAL holds. */
  intervalMs?: number;
  /** Called once if the thread exits on its own (an error, or it was terminated). */
  onExit?: (error: Error) => void;
}

/**
 * Checkpoints a WAL-mode SQLite file from a thread with a connection of its own. With SQLite's
 * automatic checkpoints, the COMMIT that crosses `wal_autocheckpoint` pages copies the WAL into
 * the database and fsyncs it, on the calling thread: better-sqlite3 is synchronous, so the worker's
 * event loop stopped for 20-50 ms at a time (measured by `npm run bench`; ADR 0007). A PASSIVE checkpoint on another connection
 * runs beside the writer and never waits for it; the writer restarts the WAL once a checkpoint
 * has copied all of it, so the file stays bounded. The caller turns its connection's automatic
 * checkpoints off while this runs, and back on when `onExit` reports that it stopped.
 */
export function startSqliteCheckpointer(options: SqliteCheckpointerOptions): SqliteCheckpointer {
  const thread = new Worker(THREAD_SOURCE, {
    eval: true,
    workerData: { filename: options.filename, driver: require.resolve('better-sqlite3'), intervalMs: options.intervalMs ?? 200 },
  });
  // The service's lifetime is the pool's, not this thread's.
  thread.unref();
  let running = true;
  let stopping = false;
  const exited = new Promise<void>((resolve) => {
    let failure: Error | undefined;
    thread.once('error', (err) => (failure = err));
    thread.once('exit', (code) => {
      running = false;
      if (!stopping) options.onExit?.(failure ?? new Error(`WAL checkpointer thread exited with code ${code}`));
      resolve();
    });
  });
  return {
    get running() {
      return running;
    },
    async stop() {
      if (!running) return;
      stopping = true;
      thread.postMessage('stop');
      const timer = setTimeout(() => void thread.terminate(), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
