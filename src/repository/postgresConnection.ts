import fs from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { DatabaseUrlError } from './databaseUrlError.js';

/**
 * How a PostgreSQL `DATABASE_URL` becomes the driver's connection settings, with libpq's meaning of
 * the TLS parameters (pg 2.x's parser reads `require` and `verify-ca` as `verify-full`), built here:
 *
 * - `disable` (or no `sslmode`): no TLS.
 * - `require`: encrypted, the certificate not checked; with an `sslrootcert` it behaves as
 *   `verify-ca`, as libpq does.
 * - `verify-ca`: the server's chain must lead to `sslrootcert`; the host name is not checked.
 * - `verify-full`: the chain and the host name (or IP address) in the certificate's SAN.
 *
 * `allow` and `prefer` are refused: they fall back to plaintext in libpq, which the driver cannot do.
 * `sslrootcert=system` trusts Node's CA store and, as in libpq 16, only with `verify-full`.
 * `PGSSLMODE` and the other `PGSSL*` variables are not read: TLS is configured in the URL alone.
 */

const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;
type SslMode = (typeof SSL_MODES)[number];

/** The value of `sslrootcert` that selects the platform's trusted roots instead of a file. */
const SYSTEM_ROOTS = 'system';

// Parameters the driver would act on by its own rules if they stayed in the URL; none is supported.
const UNSUPPORTED_PARAMETERS: Record<string, string> = {
  ssl: 'use sslmode=require, verify-ca or verify-full',
  uselibpqcompat: 'sslmode already has its libpq meaning here',
  sslcert: 'client certificates are not supported',
  sslkey: 'client certificates are not supported',
  sslpassword: 'client certificates are not supported',
  sslcrl: 'certificate revocation lists are not supported',
  sslcrldir: 'certificate revocation lists are not supported',
};

/** What the driver is given: a URL without TLS parameters, and the TLS options (false: none). */
export interface PostgresConnection {
  readonly connectionString: string;
  readonly ssl: false | ConnectionOptions;
  readonly sslMode: SslMode;
}

/**
 * The driver's settings for `url`. `password`, when given (read from `DATABASE_PASSWORD_FILE`),
 * is passed as the URL's `password` parameter, which the driver reads before `PGPASSWORD`; a URL
 * that already carries a password is refused, so the password has one source. The returned
 * connection string holds the password: it is for the driver only, never for output.
 */
export function postgresConnection(url: string, options: { password?: string } = {}): PostgresConnection {
  const queryStart = url.indexOf('?');
  const base = queryStart === -1 ? url : url.slice(0, queryStart);
  const params = new URLSearchParams(queryStart === -1 ? '' : url.slice(queryStart + 1));
  for (const [name, why] of Object.entries(UNSUPPORTED_PARAMETERS)) {
    if (params.has(name)) throw new DatabaseUrlError(`DATABASE_URL parameter ${name} is not supported: ${why}`);
  }
  const sslMode = parseSslMode(params.get('sslmode'));
  const rootCert = params.get('sslrootcert');
  const changed = params.has('sslmode') || params.has('sslrootcert') || options.password !== undefined;
  params.delete('sslmode');
  params.delete('sslrootcert');
  if (options.password !== undefined) {
    if (urlHasPassword(base) || params.has('password')) {
      throw new DatabaseUrlError('DATABASE_URL carries a password and DATABASE_PASSWORD_FILE is set: give the password in one place');
    }
    params.set('password', options.password);
  }
  // An untouched URL goes to the driver exactly as given.
  const query = params.toString();
  const connectionString = changed ? (query ? `${base}?${query}` : base) : url;
  return { connectionString, ssl: tlsOptions(sslMode, rootCert), sslMode };
}

function parseSslMode(value: string | null): SslMode {
  if (value === null) return 'disable';
  if ((SSL_MODES as readonly string[]).includes(value)) return value as SslMode;
  const hint = value === 'allow' || value === 'prefer' ? ' (it falls back to plaintext in libpq, which this driver cannot do: use require or disable)' : '';
  throw new DatabaseUrlError(`DATABASE_URL sslmode=${value} is not supported${hint}; use one of ${SSL_MODES.join(', ')}`);
}

function tlsOptions(mode: SslMode, rootCert: string | null): false | ConnectionOptions {
  if (rootCert === SYSTEM_ROOTS && mode !== 'verify-full') {
    throw new DatabaseUrlError(`DATABASE_URL sslrootcert=system needs sslmode=verify-full (got ${mode}), as in libpq`);
  }
  if (mode === 'disable') return false;
  const ca = rootCert === null || rootCert === SYSTEM_ROOTS ? undefined : readRootCertificate(rootCert);
  // libpq: with a root certificate, require verifies the chain like verify-ca.
  const effective = mode === 'require' && ca !== undefined ? 'verify-ca' : mode;
  switch (effective) {
    case 'require':
      return { rejectUnauthorized: false };
    case 'verify-ca':
      if (ca === undefined) throw new DatabaseUrlError('DATABASE_URL sslmode=verify-ca needs sslrootcert=<file of the CA certificate>');
      // The chain is still checked (rejectUnauthorized stays on); only the name check is skipped.
      return { ca, checkServerIdentity: () => undefined };
    case 'verify-full':
      if (ca === undefined && rootCert !== SYSTEM_ROOTS) {
        throw new DatabaseUrlError('DATABASE_URL sslmode=verify-full needs sslrootcert=<file of the CA certificate> or sslrootcert=system');
      }
      return ca === undefined ? {} : { ca };
  }
}

function readRootCertificate(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new DatabaseUrlError(`DATABASE_URL sslrootcert=${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** Whether the URL's userinfo holds a password (`user:secret@`), without parsing the rest of it. */
function urlHasPassword(base: string): boolean {
  return /^[a-z]+:\/\/[^/@]*:[^/@]*@/i.test(base);
}

/**
 * The password in a password file: its content without the one line ending editors and secret
 * stores append. An empty password is refused rather than sent.
 */
export function readPasswordFile(file: string): string {
  let content: string;
  try {
    content = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new DatabaseUrlError(`DATABASE_PASSWORD_FILE ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const password = content.replace(/\r?\n$/, '');
  if (password === '') throw new DatabaseUrlError(`DATABASE_PASSWORD_FILE ${file} is empty`);
  return password;
}
