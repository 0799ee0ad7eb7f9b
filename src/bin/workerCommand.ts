import { errors } from '@nats-io/transport-node';
import type { Config } from '../config.js';
import { NatsPermissionError } from '../events/natsPermissions.js';
import { createLogger } from '../logger.js';
import { DatabaseUrlError } from '../repository/database.js';
import { openDatabase } from './assembly.js';
import { connectNats } from './connectNats.js';
import { startWorker } from './worker.js';

/** The permission error behind a failed start (startComponents wraps it when stopping failed too). */
function permissionErrorOf(err: unknown): NatsPermissionError | undefined {
  if (err instanceof NatsPermissionError) return err;
  if (err instanceof AggregateError && err.errors[0] instanceof NatsPermissionError) return err.errors[0];
  return undefined;
}

/**
 * Runs the worker until SIGTERM/SIGINT. The first signal stops pulling, settles in-flight events,
 * drains NATS and closes the database; a second signal, or the shutdown timeout, exits non-zero.
 */
export async function runWorkerCommand(config: Config): Promise<number> {
  const logger = createLogger(config.logLevel);
  // Connected first: bad NATS credentials settings are a ConfigError before any pool exists.
  const nc = await connectNats(config, 'pending-projector-worker');
  let db;
  try {
    db = openDatabase(config, logger);
  } catch (err) {
    // A DATABASE_URL the worker refuses (a config error): the open connection would keep the process alive.
    await nc.close().catch(() => undefined);
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
  let worker;
  try {
    worker = await startWorker({ db, nc, config, logger });
  } catch (err) {
    const denied = permissionErrorOf(err);
    // A DATABASE_URL only the database could refuse (a search_path selecting no schema): configuration too.
    const badUrl = err instanceof DatabaseUrlError ? err : undefined;
    if (denied) {
      logger.fatal({ denials: denied.denials }, denied.message);
      process.stderr.write(`pending-projector: ${denied.message}\n`);
    } else if (badUrl) process.stderr.write(`pending-projector: ${badUrl.message}\n`);
    else logger.fatal({ err }, 'worker failed to start');
    await nc.close().catch(() => undefined);
    await db.destroy();
    // Missing permissions and a refused URL are the deployment's configuration: the config-error exit code.
    return denied || badUrl ? 2 : 1;
  }
  return new Promise<number>((resolve) => {
    let signals = 0;
    const shutdown = (signal: string) => {
      signals++;
      if (signals > 1) {
        logger.error({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
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
    process.on('SIGTERM', () => shutdown('SIGTERM'));
    process.on('SIGINT', () => shutdown('SIGINT'));
  });
}
