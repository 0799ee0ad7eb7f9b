import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/** The root logger: JSON lines on stdout. Components take `logger.child({ component })`. */
export function createLogger(level: string = 'info'): Logger {
  return pino({ level, base: { service: 'pending-projector' }, timestamp: pino.stdTimeFunctions.isoTime });
}

/** For library callers and tests that want no output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
