import { ERROR_CODES, PendingProjectorError, coerceError } from '../errors.js';
import { EXIT_CODES } from './exitCodes.js';

/**
 * Why a command could not connect, told in one line a person can act on: the setting, the address
 * (credentials masked by the caller), the reason, and what to check.
 *
 * - `unreachable`: nothing answered (refused, timed out, no such host): exit 3, try again later.
 * - `tls`: a TLS handshake or certificate refused, or TLS required and not offered: exit 2.
 * - `credentials`: the server refused who we are: exit 2.
 * - `configuration`: the address names nothing usable (no such database, an unopenable file): exit 2.
 * - `other`: a failure this list does not know: exit 1.
 */
export type ConnectionFailureKind = 'unreachable' | 'tls' | 'credentials' | 'configuration' | 'other';

/** Which connection failed: the setting that names it, and its address with credentials masked. */
export interface ConnectionTarget {
  /** `NATS` or `the database`. */
  readonly service: string;
  /** E.g. `NATS_URL / --nats-url`. */
  readonly setting: string;
  readonly address: string;
}

export class ConnectionFailedError extends PendingProjectorError {
  override name = 'ConnectionFailedError';
  constructor(
    readonly kind: ConnectionFailureKind,
    readonly target: ConnectionTarget,
    /** The server's or the driver's words, without a secret. */
    readonly reason: string,
    /** What to check or change, as a sentence. */
    readonly hint: string,
    options?: { cause?: unknown },
  ) {
    super(ERROR_CODES.CONNECTION_FAILED, `${LEADS[kind]} ${target.service} at ${target.address} (${target.setting}): ${oneLine(reason)}. ${hint}`, options);
  }

  get exitCode(): number {
    switch (this.kind) {
      case 'unreachable':
        return EXIT_CODES.unreachable;
      case 'other':
        return EXIT_CODES.failed;
      default:
        return EXIT_CODES.configuration;
    }
  }
}

const LEADS: Record<ConnectionFailureKind, string> = {
  unreachable: 'cannot reach',
  tls: 'TLS refused with',
  credentials: 'cannot log in to',
  configuration: 'cannot use',
  other: 'cannot connect to',
};

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replace(/[.\s]+$/, '');
}

/** `value` and its causes, outermost first (bounded: nothing stops a cause cycle). */
function chainOf(value: unknown): Array<Error & { code?: unknown }> {
  const chain: Array<Error & { code?: unknown }> = [];
  for (let error: unknown = value; error !== undefined && error !== null && chain.length < 8; error = (error as { cause?: unknown }).cause) {
    chain.push(coerceError(error));
  }
  return chain;
}

const codeOf = (error: { code?: unknown }): string => (typeof error.code === 'string' ? error.code : '');

// Node's TLS errors and OpenSSL's verification results (UNABLE_TO_VERIFY_LEAF_SIGNATURE,
// DEPTH_ZERO_SELF_SIGNED_CERT, CERT_HAS_EXPIRED, ...); EPROTO is a handshake the peer broke off.
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH$|EPROTO$)|CERT/;
// nats.js: "server does not support 'tls'"; pg: "The server does not support SSL connections";
// PostgreSQL's pg_hba refusal of a plain connection: "..., no encryption".
const TLS_MESSAGE = /\b(tls|ssl)\b|certificate|no encryption/i;
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'EADDRNOTAVAIL',
  '57P03',
  '53300',
]);
const UNREACHABLE_NAMES = new Set(['TimeoutError', 'KnexTimeoutError']);

function isTls(chain: Array<Error & { code?: unknown }>): boolean {
  return chain.some((e) => TLS_CODE.test(codeOf(e)) || TLS_MESSAGE.test(e.message));
}

function isUnreachable(chain: Array<Error & { code?: unknown }>): boolean {
  return chain.some(
    (e) => UNREACHABLE_CODES.has(codeOf(e)) || UNREACHABLE_NAMES.has(e.name) || (e.name === 'ConnectionError' && /refused|timeout|timed out/i.test(e.message)),
  );
}

/** The driver's words: the innermost message with a socket or server code, else the outermost. */
function reasonOf(chain: Array<Error & { code?: unknown }>, mask: (text: string) => string): string {
  const coded = [...chain].reverse().find((e) => codeOf(e) !== '');
  const error = coded ?? chain[0]!;
  const code = codeOf(error);
  return mask(code && !error.message.includes(code) ? `${error.message} (${code})` : error.message);
}

const NATS_SETTING = 'NATS_URL / --nats-url';

/** The ConnectionFailedError of a NATS connect that rejected (refused credentials excepted: see connectNats). */
export function natsConnectionFailure(err: unknown, address: string, mask: (text: string) => string): ConnectionFailedError {
  const chain = chainOf(err);
  const target = { service: 'NATS', setting: NATS_SETTING, address };
  const reason = reasonOf(chain, mask);
  if (isTls(chain)) {
    return new ConnectionFailedError(
      'tls',
      target,
      reason,
      'Check that the server offers TLS, that its certificate is signed by a CA NATS_TLS_CA_FILE holds (or a public one) and names the host NATS_URL gives it (a DNS: entry for a name, an IP: entry for an address), and that NATS_TLS_CERT_FILE / NATS_TLS_KEY_FILE are given when the server verifies clients',
      { cause: err },
    );
  }
  if (isUnreachable(chain)) {
    return new ConnectionFailedError(
      'unreachable',
      target,
      reason,
      'Check that nats-server (with JetStream: nats-server -js) is running and listening there, or correct NATS_URL',
      { cause: err },
    );
  }
  return new ConnectionFailedError('other', target, reason, 'Check the server and NATS_URL; LOG_LEVEL=debug shows the stack', { cause: err });
}

const DATABASE_SETTING = 'DATABASE_URL / --database-url';
// PostgreSQL's SQLSTATEs for a refused login (28000 without TLS is a TLS refusal, matched first)
// and a missing CONNECT privilege; a database that does not exist.
const CREDENTIAL_CODES = new Set(['28P01', '28000', '42501']);
const MISSING_DATABASE_CODES = new Set(['3D000']);
// A file SQLite or the file system will not open: no such directory, no permission, not a database.
const UNUSABLE_FILE_CODE = /^(SQLITE_CANTOPEN|SQLITE_NOTADB|SQLITE_PERM|SQLITE_READONLY|EACCES|EPERM|ENOENT|ENOTDIR|EEXIST|EROFS|EISDIR)/;

/** The ConnectionFailedError of a database that could not be opened or answer its first statement. */
export function databaseConnectionFailure(err: unknown, address: string, mask: (text: string) => string): ConnectionFailedError {
  const chain = chainOf(err);
  const target = { service: 'the database', setting: DATABASE_SETTING, address };
  const reason = reasonOf(chain, mask);
  const codes = chain.map(codeOf);
  if (isTls(chain)) {
    return new ConnectionFailedError(
      'tls',
      target,
      reason,
      "Check sslmode and sslrootcert in DATABASE_URL against the server's certificate and pg_hba.conf (docs/security.md#postgresql-over-tls)",
      { cause: err },
    );
  }
  if (codes.some((c) => CREDENTIAL_CODES.has(c)) || chain.some((e) => /password/i.test(e.message))) {
    return new ConnectionFailedError(
      'credentials',
      target,
      reason,
      "Check the user in DATABASE_URL, its password (in DATABASE_URL, DATABASE_PASSWORD_FILE or PGPASSWORD) and the server's pg_hba.conf",
      { cause: err },
    );
  }
  if (codes.some((c) => MISSING_DATABASE_CODES.has(c))) {
    return new ConnectionFailedError('configuration', target, reason, 'Create that database, or correct the database name in DATABASE_URL', { cause: err });
  }
  if (codes.some((c) => UNUSABLE_FILE_CODE.test(c))) {
    return new ConnectionFailedError(
      'configuration',
      target,
      reason,
      'Check that the path of DATABASE_URL is a SQLite database (or where one may be created) this user can read and write',
      { cause: err },
    );
  }
  if (isUnreachable(chain)) {
    return new ConnectionFailedError(
      'unreachable',
      target,
      reason,
      'Check that PostgreSQL is running and accepts TCP connections there, or correct the host and port in DATABASE_URL',
      { cause: err },
    );
  }
  return new ConnectionFailedError('other', target, reason, 'Check the server and DATABASE_URL; LOG_LEVEL=debug shows the stack', { cause: err });
}
