import pino, { type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import { REDACTED, redactCredentials, secretLogPaths } from './redaction.js';

export type { Logger } from 'pino';

/** LOG_FORMAT: `auto` is `pretty` when stdout is a terminal and `json` otherwise. */
export const LOG_FORMAT_SETTINGS = ['auto', 'json', 'pretty'] as const;
export type LogFormatSetting = (typeof LOG_FORMAT_SETTINGS)[number];
export type LogFormat = Exclude<LogFormatSetting, 'auto'>;

/** The format a setting means here: `auto` asks whether stdout is a terminal (a person reads it). */
export function resolveLogFormat(setting: LogFormatSetting, stdoutIsTerminal: boolean = process.stdout.isTTY === true): LogFormat {
  if (setting !== 'auto') return setting;
  return stdoutIsTerminal ? 'pretty' : 'json';
}

export interface LoggerOptions {
  /** Where lines go; stdout (fd 1, written synchronously) by default. */
  destination?: pino.DestinationStream;
  /** `json` (one object a line, the default) or `pretty` (pino-pretty's text, for a terminal). */
  format?: LogFormat;
}

/**
 * Every line on its way out with URL credentials masked: wherever a DATABASE_URL or NATS_URL is
 * quoted (a message, a child's bindings, a driver error's message or stack), one rule covers it.
 * pino does not pass child bindings through its formatters, so the finished line is the one place.
 * The pretty format is made from that masked line, so it cannot show more than the JSON does.
 */
function maskingCredentials(destination: pino.DestinationStream, format: LogFormat, colorize: boolean): pino.DestinationStream {
  if (format === 'json') return { write: (line: string) => destination.write(redactCredentials(line)) };
  // pino-pretty's prettifier as a plain function, not its stream: a stream (or a transport's
  // worker thread) formats later, so lines logged just before an exit could be lost, and the
  // masking would have to run there too. This keeps every line written before `write` returns.
  const prettify = pinoPretty.prettyFactory({
    colorize,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'service,component',
    messageFormat: '{if component}({component}) {end}{msg}',
    singleLine: true,
  });
  return { write: (line: string) => destination.write(prettify(redactCredentials(line))) };
}

/**
 * The root logger: JSON lines (or pretty text) on stdout, or `options.destination`. Components
 * take `logger.child({ component })`. Fields named like a secret (SECRET_FIELDS, at the top level
 * and one down) are censored, and URL credentials masked in every line, in either format.
 */
export function createLogger(level: string = 'info', options: LoggerOptions | pino.DestinationStream = {}): Logger {
  const { destination, format = 'json' } = 'write' in options ? { destination: options } : options;
  // Colours only on our own stdout, and only when pino-pretty finds it can show them (a terminal, no NO_COLOR).
  const colorize = destination === undefined && (pinoPretty as unknown as { isColorSupported: boolean }).isColorSupported;
  return pino(
    { level, base: { service: 'pending-projector' }, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: secretLogPaths(), censor: REDACTED } },
    maskingCredentials(destination ?? pino.destination(1), format, colorize),
  );
}

/** For library callers and tests that want no output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
