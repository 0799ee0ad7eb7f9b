import { accessSync, constants, readFileSync } from 'node:fs';
import {
  credsAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator,
  type ConnectionOptions,
  type TlsOptions,
} from '@nats-io/transport-node';
import { ConfigError, type Config } from '../config.js';
import { checkNatsServerIdentity } from './natsServerIdentity.js';

/** The settings a NATS connection reads (see the config table); absent ones are unset. */
export type NatsClientSettings = Pick<Config, 'natsUrl'> &
  Partial<
    Pick<
      Config,
      | 'natsToken'
      | 'natsTokenFile'
      | 'natsUser'
      | 'natsPassword'
      | 'natsPasswordFile'
      | 'natsNkeySeedFile'
      | 'natsCredsFile'
      | 'natsTlsCaFile'
      | 'natsTlsCertFile'
      | 'natsTlsKeyFile'
      | 'natsInboxPrefix'
    >
  >;

/** Every NATS setting, for the commands that connect (src/bin/cli.ts). */
export const NATS_CLIENT_SETTINGS = [
  'natsUrl',
  'natsToken',
  'natsTokenFile',
  'natsUser',
  'natsPassword',
  'natsPasswordFile',
  'natsNkeySeedFile',
  'natsCredsFile',
  'natsTlsCaFile',
  'natsTlsCertFile',
  'natsTlsKeyFile',
  'natsInboxPrefix',
] as const satisfies readonly (keyof NatsClientSettings)[];

interface ParsedServers {
  servers: string[];
  tls: boolean;
  /** Credentials found in the URLs (all URLs that carry any must carry the same). */
  user?: string;
  password?: string;
  token?: string;
}

/**
 * `NATS_URL` split into host:port entries (nats.js drops the scheme, and would read a password's
 * leading digits as a port), whether any says `tls://`, and the credentials the URLs carry.
 */
function parseServers(natsUrl: string, problems: string[]): ParsedServers {
  const parsed: ParsedServers = { servers: [], tls: false };
  const seen = new Set<string>();
  for (const entry of natsUrl
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(entry) ? entry : `nats://${entry}`;
    let url: URL;
    try {
      url = new URL(withScheme);
    } catch {
      problems.push(`NATS_URL / --nats-url: an entry is not a URL (expected nats://host:port or tls://host:port)`);
      continue;
    }
    const scheme = url.protocol.replace(/:$/, '').toLowerCase();
    if (scheme !== 'nats' && scheme !== 'tls') {
      problems.push(`NATS_URL / --nats-url: scheme ${JSON.stringify(scheme)} is not nats:// or tls://`);
      continue;
    }
    if (scheme === 'tls') parsed.tls = true;
    parsed.servers.push(url.host || '127.0.0.1:4222');
    if (url.username || url.password) {
      const user = decodeURIComponent(url.username);
      const password = url.password ? decodeURIComponent(url.password) : undefined;
      seen.add(JSON.stringify([user, password]));
      if (password === undefined) parsed.token = user;
      else {
        parsed.user = user;
        parsed.password = password;
      }
    }
  }
  if (seen.size > 1) problems.push('NATS_URL / --nats-url: the servers carry different credentials; give one set (or use NATS_USER / NATS_PASSWORD_FILE)');
  if (parsed.servers.length === 0 && problems.length === 0) problems.push('NATS_URL / --nats-url: no server given');
  return parsed;
}

/**
 * A secret read from `path` (surrounding whitespace dropped: files written by `echo` end in a
 * newline). Reread at each call, so a rotated file is picked up at the next reconnect; a file that
 * became unreadable meanwhile keeps the last value, and the server's answer decides.
 */
function secretFile(path: string, setting: string, problems: string[]): (() => string) | undefined {
  let last: string;
  try {
    last = readFileSync(path, 'utf8').trim();
  } catch (err) {
    problems.push(`${setting}: cannot read ${JSON.stringify(path)} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    return undefined;
  }
  if (!last) problems.push(`${setting}: ${JSON.stringify(path)} is empty`);
  return () => {
    try {
      last = readFileSync(path, 'utf8').trim() || last;
    } catch {
      // Keep the last value read.
    }
    return last;
  };
}

function readable(path: string, setting: string, problems: string[]): void {
  try {
    accessSync(path, constants.R_OK);
  } catch (err) {
    problems.push(`${setting}: cannot read ${JSON.stringify(path)} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

const encoder = new TextEncoder();

/**
 * Who a connection authenticates as and how to correct it, for the error of a server that refuses
 * it: user names, setting names and paths, never a secret.
 */
export interface NatsIdentity {
  /** E.g. `user "worker" (password from NATS_PASSWORD_FILE / --nats-password-file)`. */
  readonly who: string;
  /** What to change when the server refuses it. */
  readonly fix: string;
}

interface AuthMethod {
  name: string;
  authenticator?: Authenticator;
  identity: NatsIdentity;
}

const NO_CREDENTIALS: NatsIdentity = {
  who: 'a connection without credentials',
  fix: 'give the credentials of a user the server knows: NATS_USER with NATS_PASSWORD_FILE, or NATS_TOKEN_FILE, NATS_NKEY_SEED_FILE or NATS_CREDS_FILE (docs/security.md#secrets)',
};

// The users of deploy/nats, whose passwords are the server's <USER>_PASSWORD variables.
const SHIPPED_USERS = new Set(['worker', 'backend', 'ui', 'agent', 'ops']);

function userIdentity(user: string, source: string): NatsIdentity {
  const shipped = SHIPPED_USERS.has(user) ? ` (with deploy/nats: the server's ${user.toUpperCase()}_PASSWORD)` : '';
  return {
    who: `user ${JSON.stringify(user)} (password from ${source})`,
    fix: `check that the user name is right and give the password the server holds for ${JSON.stringify(user)}${shipped} in ${source}`,
  };
}

function tokenIdentity(source: string): NatsIdentity {
  return { who: `the token from ${source}`, fix: `give the token the server's authorization expects in ${source}` };
}

/**
 * The nats.js connection options for the settings: servers, at most one way to authenticate
 * (token, user/password, NKey seed, credentials file; from the settings or the URL), TLS when a
 * URL says `tls://` or any TLS file is given, and the inbox prefix; and who the options
 * authenticate as (for the error of a server that refuses them). Secrets are read from their files
 * here, once, to fail at start; a problem of any of them throws one ConfigError listing all,
 * naming settings and paths, never a secret.
 */
export function resolveNatsConnection(settings: NatsClientSettings): { options: ConnectionOptions; identity: NatsIdentity } {
  const problems: string[] = [];
  const urls = parseServers(settings.natsUrl, problems);
  const methods: AuthMethod[] = [];

  if (settings.natsToken && settings.natsTokenFile) problems.push('NATS_TOKEN and NATS_TOKEN_FILE are both set: give one');
  if (settings.natsPassword && settings.natsPasswordFile) problems.push('NATS_PASSWORD and NATS_PASSWORD_FILE are both set: give one');
  const { natsToken, natsPassword, natsUser = '' } = settings;
  const token = settings.natsTokenFile
    ? secretFile(settings.natsTokenFile, 'NATS_TOKEN_FILE / --nats-token-file', problems)
    : natsToken
      ? () => natsToken
      : undefined;
  const tokenSource = settings.natsTokenFile ? `NATS_TOKEN_FILE / --nats-token-file (${JSON.stringify(settings.natsTokenFile)})` : 'NATS_TOKEN / --nats-token';
  if (token) methods.push({ name: 'a token (NATS_TOKEN / NATS_TOKEN_FILE)', authenticator: tokenAuthenticator(token), identity: tokenIdentity(tokenSource) });
  if (urls.token !== undefined)
    methods.push({ name: 'a token in NATS_URL', authenticator: tokenAuthenticator(urls.token), identity: tokenIdentity('NATS_URL / --nats-url') });

  const password = settings.natsPasswordFile
    ? secretFile(settings.natsPasswordFile, 'NATS_PASSWORD_FILE / --nats-password-file', problems)
    : natsPassword
      ? () => natsPassword
      : undefined;
  if (natsUser || natsPassword || settings.natsPasswordFile) {
    if (!natsUser) problems.push('NATS_PASSWORD / NATS_PASSWORD_FILE is set without NATS_USER / --nats-user');
    else if (!natsPassword && !settings.natsPasswordFile) problems.push('NATS_USER is set without NATS_PASSWORD / NATS_PASSWORD_FILE');
    const source = settings.natsPasswordFile
      ? `NATS_PASSWORD_FILE / --nats-password-file (${JSON.stringify(settings.natsPasswordFile)})`
      : 'NATS_PASSWORD / --nats-password';
    methods.push({
      name: 'a user and password (NATS_USER)',
      authenticator: password && usernamePasswordAuthenticator(natsUser, password),
      identity: userIdentity(natsUser, source),
    });
  }
  if (urls.user !== undefined) {
    methods.push({
      name: 'a user and password in NATS_URL',
      authenticator: usernamePasswordAuthenticator(urls.user, urls.password ?? ''),
      identity: userIdentity(urls.user, 'NATS_URL / --nats-url'),
    });
  }

  if (settings.natsNkeySeedFile) {
    const seed = secretFile(settings.natsNkeySeedFile, 'NATS_NKEY_SEED_FILE / --nats-nkey-seed-file', problems);
    methods.push({
      name: 'an NKey seed (NATS_NKEY_SEED_FILE)',
      authenticator: seed && nkeyAuthenticator(() => encoder.encode(seed())),
      identity: {
        who: `the NKey of NATS_NKEY_SEED_FILE / --nats-nkey-seed-file (${JSON.stringify(settings.natsNkeySeedFile)})`,
        fix: "give that setting the seed of a user the server knows, or add this seed's public key to the server's users",
      },
    });
  }
  if (settings.natsCredsFile) {
    const creds = secretFile(settings.natsCredsFile, 'NATS_CREDS_FILE / --nats-creds-file', problems);
    methods.push({
      name: 'a credentials file (NATS_CREDS_FILE)',
      authenticator: creds && credsAuthenticator(() => encoder.encode(creds())),
      identity: {
        who: `the credentials of NATS_CREDS_FILE / --nats-creds-file (${JSON.stringify(settings.natsCredsFile)})`,
        fix: "give that setting a credentials file of the server's operator, not expired or revoked",
      },
    });
  }
  if (methods.length > 1) problems.push(`NATS authentication is given ${methods.length} ways (${methods.map((m) => m.name).join(', ')}): give one`);

  const tlsFiles: Array<[keyof TlsOptions, string | undefined, string]> = [
    ['caFile', settings.natsTlsCaFile, 'NATS_TLS_CA_FILE / --nats-tls-ca-file'],
    ['certFile', settings.natsTlsCertFile, 'NATS_TLS_CERT_FILE / --nats-tls-cert-file'],
    ['keyFile', settings.natsTlsKeyFile, 'NATS_TLS_KEY_FILE / --nats-tls-key-file'],
  ];
  if (Boolean(settings.natsTlsCertFile) !== Boolean(settings.natsTlsKeyFile))
    problems.push('NATS_TLS_CERT_FILE and NATS_TLS_KEY_FILE go together: give both or neither');
  const tls: TlsOptions = {};
  for (const [option, path, setting] of tlsFiles) {
    if (!path) continue;
    readable(path, setting, problems);
    (tls as Record<string, string>)[option] = path;
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const options: ConnectionOptions = { servers: urls.servers };
  if (settings.natsInboxPrefix) options.inboxPrefix = settings.natsInboxPrefix;
  const authenticator = methods[0]?.authenticator;
  if (authenticator) options.authenticator = authenticator;
  // Files or not, TLS is required (nats.js refuses a server that offers none), and each server's
  // certificate is checked against its own host in NATS_URL (natsServerIdentity). nats.js copies
  // these options into Node's tls.connect, which TlsOptions does not declare.
  if (urls.tls || Object.keys(tls).length > 0) options.tls = { ...tls, checkServerIdentity: checkNatsServerIdentity } as TlsOptions;
  return { options, identity: methods[0]?.identity ?? NO_CREDENTIALS };
}
