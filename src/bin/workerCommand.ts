import { errors } from '@nats-io/transport-node';
import { NatsMaxPayloadError } from '../events/natsMaxPayload.js';
import { NatsPermissionError } from '../events/natsPermissions.js';
import { createLogger, resolveLogFormat } from '../logger.js';
import { probeDatabase } from './connectDatabase.js';
import { prepareConnections } from './prepareConnections.js';
import { watchShutdownSignals, type ShutdownSignal } from './shutdownSignals.js';
import { DatabaseUrlError } from '../repository/database.js';
import { SqliteWorkerLockedError } from '../repository/sqliteWorkerLock.js';
import { startWorker, type WorkerDeps } from './worker.js';
import type { WorkerSettings } from './commandSettings.js';

/** The permission error behind a failed start (startComponents wraps it when stopping failed too). */
function permissionErrorOf(err: unknown): NatsPermissionError | undefined {
  if (err instanceof NatsPermissionError) return err;
  if (err instanceof AggregateError && err.errors[0] instanceof NatsPermissionError) return err.errors[0];
  return undefined;
}

/**
 * Runs the worker until SIGTERM/SIGINT. The first signal stops pulling, settles in-flight events,
 * drains NATS and closes the database; a second signal (a second or more later: see
 * `SIGNAL_REPEAT_MS`), or the shutdown timeout, exits non-zero. `hooks.failpoints` is for the crash
 * tests' own entry (test/support/failpointWorker.ts); the CLI never passes it.
 */
export async function runWorkerCommand(config: WorkerSettings, hooks: Pick<WorkerDeps, 'failpoints'> = {}): Promise<number> {
  const logger = createLogger(config.logLevel, { format: resolveLogFormat(config.logFormat) });
  // Every setting of both connections is checked before either is made; then the database first:
  // its failure closes no NATS connection that would keep the process alive.
  const { db, nats } = prepareConnections(config, logger);
  let nc;
  try {
    await probeDatabase(db, config.databaseUrl);
    nc = await nats.connect('pending-projector-worker');
  } catch (err) {
    await db.destroy();
    throw err;
  }
  // Once per subject: every projection may meet the same refusal.
  const refusalsLogged = new Set<string>();
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect') logger.warn({ nats: status.type }, 'NATS connection status');
      // A permission the start could not probe without showing others a message, refused at use.
      if (status.type === 'error' && status.error instanceof errors.PermissionViolationError) {
        const { operation, subject } = status.error;
        if (refusalsLogged.has(`${operation} ${subject}`)) continue;
        refusalsLogged.add(`${operation} ${subject}`);
        logger.error({ nats: 'permission', operation, subject }, `NATS refused ${operation} to "${subject}": grant it to this user (docs/security.md)`);
      }
    }
  })();
  // Listening before the start: a signal while the worker starts is kept and acted on once it has
  // started, instead of killing the process before its shutdown path exists.
  let requested: ShutdownSignal | undefined;
  let onStop = (signal: ShutdownSignal) => {
    requested = signal;
  };
  const unwatch = watchShutdownSignals({
    stop: (signal) => onStop(signal),
    force: (signal) => {
      logger.error({ signal }, 'second signal: exiting now');
      process.exit(130);
    },
  });
  let worker;
  try {
    worker = await startWorker({ db, nc, config, logger, failpoints: hooks.failpoints });
  } catch (err) {
    const denied = permissionErrorOf(err);
    // A DATABASE_URL only the database could refuse (a search_path selecting no schema), a SQLite
    // file another worker serves, or a NATS server whose max_payload is too small: configuration too.
    const badUrl = err instanceof DatabaseUrlError || err instanceof SqliteWorkerLockedError || err instanceof NatsMaxPayloadError ? err : undefined;
    if (denied) {
      logger.fatal({ denials: denied.denials }, denied.message);
      process.stderr.write(`pending-projector: ${denied.message}\n`);
    } else if (badUrl) process.stderr.write(`pending-projector: ${badUrl.message}\n`);
    else logger.fatal({ err }, 'worker failed to start');
    unwatch();
    await nc.close().catch(() => undefined);
    await db.destroy();
    // Missing permissions and a refused URL are the deployment's configuration: the config-error exit code.
    return denied || badUrl ? 2 : 1;
  }
  return new Promise<number>((resolve) => {
    const shutdown = (signal: ShutdownSignal) => {
      logger.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
      const timer = setTimeout(() => {
        logger.error('shutdown timed out: exiting');
        process.exit(1);
      }, config.shutdownTimeoutMs);
      timer.unref();
      void (async () => {
        try {
          await worker.stop();
          await nc.drain();
          await db.destroy();
          clearTimeout(timer);
          resolve(0);
        } catch (err) {
          logger.error({ err }, 'shutdown failed');
          resolve(1);
        }
      })();
    };
    onStop = shutdown;
    if (requested) shutdown(requested);
  });
}
