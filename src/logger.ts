import pino, { type Logger } from 'pino';
import { REDACTED, redactCredentials, secretLogPaths } from './redaction.js';

export type { Logger } from 'pino';

// Deep enough for `{ err: { cause: ... } }` and a config object; log objects are small.
const MAX_DEPTH = 6;

/**
 * A copy of a log value with URL credentials masked in every string (a DATABASE_URL or NATS_URL
 * quoted in a message, a driver error naming its connection string). Errors become what pino's
 * serializer makes of them, masked the same way.
 */
function scrub(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return redactCredentials(value);
  if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH) return value;
  if (value instanceof Error) return scrub(pino.stdSerializers.err(value), depth + 1);
  if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[key] = scrub(v, depth + 1);
  return out;
}

/**
 * pino options that keep secrets out of every line: fields named like a secret are censored
 * (SECRET_FIELDS, at the top level and one down), URL credentials masked in messages and values.
 */
export function redactingOptions(): pino.LoggerOptions {
  return {
    redact: { paths: secretLogPaths(), censor: REDACTED },
    formatters: { log: (object) => scrub(object, 0) as Record<string, unknown> },
    hooks: {
      logMethod(args, method) {
        method.apply(
          this,
          args.map((a) => (typeof a === 'string' ? redactCredentials(a) : a)) as Parameters<typeof method>,
        );
      },
    },
  };
}

/** The root logger: JSON lines on stdout. Components take `logger.child({ component })`. */
export function createLogger(level: string = 'info', destination?: pino.DestinationStream): Logger {
  const options = { level, base: { service: 'pending-projector' }, timestamp: pino.stdTimeFunctions.isoTime, ...redactingOptions() };
  return destination ? pino(options, destination) : pino(options);
}

/** For library callers and tests that want no output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
