import pino, { type Logger } from 'pino';
import { REDACTED, redactCredentials, secretLogPaths } from './redaction.js';

export type { Logger } from 'pino';

/**
 * Every line on its way out with URL credentials masked: wherever a DATABASE_URL or NATS_URL is
 * quoted (a message, a child's bindings, a driver error's message or stack), one rule covers it.
 * pino does not pass child bindings through its formatters, so the finished line is the one place.
 */
function maskingCredentials(destination: pino.DestinationStream): pino.DestinationStream {
  return { write: (line: string) => destination.write(redactCredentials(line)) };
}

/**
 * The root logger: JSON lines on stdout (or `destination`). Components take
 * `logger.child({ component })`. Fields named like a secret (SECRET_FIELDS, at the top level and
 * one down) are censored, and URL credentials masked in every line.
 */
export function createLogger(level: string = 'info', destination: pino.DestinationStream = pino.destination(1)): Logger {
  return pino(
    { level, base: { service: 'pending-projector' }, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: secretLogPaths(), censor: REDACTED } },
    maskingCredentials(destination),
  );
}

/** For library callers and tests that want no output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
