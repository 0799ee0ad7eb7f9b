import { ConfigError } from '../config.js';
import { PendingProjectorError } from '../errors.js';
import { NatsMaxPayloadError } from '../events/natsMaxPayload.js';
import { redactCredentials } from '../redaction.js';
import { DatabaseUrlError } from '../repository/database.js';
import { SchemaRefusedError } from '../repository/schema/schemaMode.js';
import { ConnectionFailedError } from './connectionFailure.js';
import { EXIT_CODES } from './exitCodes.js';

/** The stacks of `err` and its causes, for LOG_LEVEL=debug. */
function stacks(err: unknown): string {
  const lines: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    lines.push(depth === 0 ? (e.stack ?? e.message) : `caused by: ${e.stack ?? e.message}`);
  }
  return lines.join('\n');
}

/**
 * What a command that threw prints on stderr, and its exit code (EXIT_CODES). An expected failure
 * (an error with a stable code) is its message alone: one line for a connection, the list of bad
 * settings for a configuration error; its stack only at `debug` or `trace`. Anything else is a bug,
 * and its stack helps. Either may quote a URL: its credentials are masked.
 */
export function describeFailure(err: unknown, logLevel: string | undefined): { text: string; exitCode: number } {
  const debug = logLevel === 'debug' || logLevel === 'trace';
  const error = err instanceof Error ? err : new Error(String(err));
  const code = (error as { code?: unknown }).code;
  let exitCode: number = EXIT_CODES.failed;
  let text: string;
  if (error instanceof ConnectionFailedError) {
    text = error.message;
    exitCode = error.exitCode;
  } else if (error instanceof ConfigError || error instanceof DatabaseUrlError || error instanceof NatsMaxPayloadError) {
    text = error.message;
    exitCode = EXIT_CODES.configuration;
  } else if (error instanceof SchemaRefusedError) {
    // The database DATABASE_URL names is not one this service runs on under SCHEMA_MODE.
    text = `${error.message} (${error.code})`;
    exitCode = EXIT_CODES.configuration;
  } else if (error instanceof PendingProjectorError || typeof code === 'string') {
    text = `${error.message} (${String(code)})`;
  } else {
    return { text: redactCredentials(`pending-projector: ${stacks(error)}\n`), exitCode };
  }
  return { text: redactCredentials(`pending-projector: ${text}\n${debug ? `${stacks(error)}\n` : ''}`), exitCode };
}
