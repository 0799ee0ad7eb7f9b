import type { Config } from '../config.js';
import { createLogger } from '../logger.js';
import { openDatabase } from './assembly.js';
import { connectNats } from './connectNats.js';
import { startWorker } from './worker.js';

/**
 * Runs the worker until SIGTERM/SIGINT. The first signal stops pulling, settles in-flight events,
 * drains NATS and closes the database; a second signal, or the shutdown timeout, exits non-zero.
 */
export async function runWorkerCommand(config: Config): Promise<number> {
  const logger = createLogger(config.logLevel);
  const db = openDatabase(config, logger);
  const nc = await connectNats(config, 'pending-projector-worker');
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect') logger.warn({ nats: status.type }, 'NATS connection status');
    }
  })();
  let worker;
  try {
    worker = await startWorker({ db, nc, config, logger });
  } catch (err) {
    logger.fatal({ err }, 'worker failed to start');
    await nc.close().catch(() => undefined);
    await db.destroy();
    return 1;
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
