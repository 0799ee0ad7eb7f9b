import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { listDeadLetters } from '../events/deadLetters.js';
import { removeTopology } from '../events/removeTopology.js';
import { topologyFor } from '../contract/subjects.js';
import { createLogger, type Logger } from '../logger.js';
import { redactCredentials } from '../redaction.js';
import { createRepositoryContext } from '../repository/context.js';
import { migrateSchema } from '../repository/migrate.js';
import { seedSandboxWorkspace, type SandboxWorkspace } from '../repository/sandbox/seedSandboxWorkspace.js';
import { connectNats } from './connectNats.js';
import { openSandboxDatabase, type SandboxDatabase } from './sandboxDatabase.js';
import { sandboxGuide } from './sandboxGuide.js';
import { startWorker, type WorkerHandle } from './worker.js';
import type { WorkerConfig } from './worker.js';
import type { SandboxSettings } from './commandSettings.js';

/**
 * `pending-projector sandbox`: a throwaway deployment to try every endpoint on. It creates its own
 * database (sandboxDatabase.ts), migrates and seeds it (seedSandboxWorkspace), starts the worker in
 * this process under a subject prefix of its own, prints the commands to try (sandboxGuide.ts),
 * and at the first SIGINT/SIGTERM stops the worker and removes everything it created: the
 * database, and the prefix's streams, consumers and KV bucket. Worker logs go to stderr, so stdout
 * is the guide alone.
 */

/** The line a script (or a test) waits for: everything is seeded, projected and served. */
const SANDBOX_READY = 'sandbox ready';

/** The sandbox's own prefix unless one is given: it never serves on a real deployment's subjects. */
function sandboxPrefix(configured: string): string {
  return configured || `sandbox_${randomUUID().replaceAll('-', '').slice(0, 8)}.`;
}

interface Running {
  nc: NatsConnection;
  database?: SandboxDatabase;
  worker?: WorkerHandle;
  prefix: string;
}

/** Undoes what was created, newest first; every step runs even if one before it failed. */
async function tearDown(running: Running, logger: Logger): Promise<boolean> {
  let clean = true;
  const step = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (err) {
      clean = false;
      logger.error({ err }, `sandbox: ${what} failed`);
      process.stderr.write(`pending-projector sandbox: ${what} failed: ${redactCredentials((err as Error).message)}\n`);
    }
  };
  if (running.worker) await step('stopping the worker', () => running.worker!.stop());
  if (!running.nc.isClosed()) {
    await step('removing its streams', async () => removeTopology(await jetstreamManager(running.nc), topologyFor(running.prefix)));
    await step('closing NATS', () => running.nc.drain());
  }
  if (running.database) await step('removing its database', () => running.database!.remove());
  return clean;
}

/** Starts the sandbox and resolves with the exit code once it was stopped and cleaned up. */
/**
 * Publishes one event that is no envelope, as a producer's bug would, and waits for the worker to
 * dead-letter it (on its first delivery), so the guide's dead_letter requests have one to show.
 */
async function seedDeadLetter(nc: NatsConnection, prefix: string): Promise<number> {
  const topology = topologyFor(prefix);
  nc.publish(topology.eventSubject('message.added'), JSON.stringify({ note: 'the sandbox: an event without an envelope, dead-lettered' }));
  const jsm = await jetstreamManager(nc);
  for (let attempt = 0; attempt < 100; attempt++) {
    const [first] = await listDeadLetters(jsm, topology, 1);
    if (first) return first.id;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the worker did not dead-letter the sandbox's malformed event within 10 s");
}

export async function runSandboxCommand(config: SandboxSettings): Promise<number> {
  const logger = createLogger(config.logLevel, pino.destination(2));
  const prefix = sandboxPrefix(config.subjectPrefix);
  // NATS first: an unreachable server is reported before anything was created.
  const running: Running = { nc: await connectNats(config, 'pending-projector-sandbox'), prefix };
  let workspace: SandboxWorkspace;
  let deadLetterSeq: number;
  try {
    running.database = await openSandboxDatabase(config);
    const { db } = running.database;
    await migrateSchema(db, 'owned');
    workspace = await seedSandboxWorkspace(createRepositoryContext(db));
    const workerConfig: WorkerConfig = { ...config, subjectPrefix: prefix, healthPort: 0, schemaMode: 'owned', bootReconcile: true };
    running.worker = await startWorker({ db, nc: running.nc, config: workerConfig, logger });
    // The boot reconcile publishes every seeded task's first summary: once it ends, the bus shows the seeded state.
    await running.worker.bootReconcile;
    await running.worker.summaryBucketFilled();
    deadLetterSeq = await seedDeadLetter(running.nc, prefix);
  } catch (err) {
    await tearDown(running, logger);
    throw err;
  }
  process.stdout.write(
    sandboxGuide({
      prefix,
      workspace,
      databaseWhere: running.database.where,
      databaseUrl: running.database.url,
      shareable: running.database.url !== 'sqlite::memory:',
      natsUrl: redactCredentials(config.natsUrl),
      healthPort: running.worker.healthPort,
      deadLetterSeq,
    }),
  );
  process.stdout.write(`${SANDBOX_READY} (prefix ${prefix}): Ctrl-C to stop\n`);

  return new Promise<number>((resolve) => {
    let signals = 0;
    const stop = (signal: string) => {
      signals++;
      if (signals > 1) {
        process.stderr.write(`pending-projector sandbox: second ${signal}, exiting without cleaning up (prefix ${prefix}, ${running.database!.where})\n`);
        process.exit(130);
      }
      process.stdout.write(`${signal}: stopping the sandbox and removing what it created\n`);
      const timer = setTimeout(() => {
        process.stderr.write('pending-projector sandbox: shutdown timed out\n');
        process.exit(1);
      }, config.shutdownTimeoutMs);
      timer.unref();
      void tearDown(running, logger).then((clean) => {
        clearTimeout(timer);
        if (clean) process.stdout.write('sandbox stopped: its database, streams and KV bucket are gone\n');
        resolve(clean ? 0 : 1);
      });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}
