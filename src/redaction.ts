/**
 * The one rule for keeping secrets out of text a person reads (logs, config errors, `--help`,
 * stderr): credentials inside URLs are masked, and fields that carry a secret are censored.
 * Dependency-free, so the logger, the config and the CLI share it.
 */

export const REDACTED = '[REDACTED]';

// `scheme://user:password@` (the password part) and `scheme://token@` (a lone userinfo is a token
// for NATS); query parameters whose name says they hold a secret. A `"` ends a match: it never
// stands raw in a URL, and it ends a JSON string, so masking a log line never reaches into the
// next field. In a JSON line that `"` may be escaped (`\"`, a URL quoted inside a message): a
// parameter's value takes a backslash with the character after it, so it stops before `\"`.
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:"]*)(?::([^\s/@"]*))?@/gi;
const TOKEN_SCHEMES = /^(nats|tls|ws|wss):\/\/$/i;
const QUERY_PARAM = /([?&])([^=&\s#"?]+)=((?:\\[^"]|[^&\s#"\\])*)/g;
// libpq reads password and sslpassword (pg-connection-string decodes the names: `pass%77ord` is a
// password too); the rest are the usual names of a secret in any URL. Compared decoded, ignoring case.
const SECRET_PARAM_NAME = /(?:password|passwd|pwd|token|secret|api[_-]?key|seed|creds|jwt|signature)$|^(?:pass|auth|authorization|nkey|key)$/i;

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}

/** Whether a URL query parameter called `name` (as written, percent-encoded or not) carries a secret. */
export function isSecretParameter(name: string): boolean {
  return SECRET_PARAM_NAME.test(decodedName(name).trim());
}

/**
 * `text` with every URL's userinfo secret replaced: `nats://user:pw@h` becomes
 * `nats://user:[REDACTED]@h`, and `nats://token@h` becomes `nats://[REDACTED]@h` (but
 * `postgres://app@h` keeps its user name); and the value of every query parameter named like a
 * secret (`?password=`, `&sslpassword=`, `&token=`, `&access_token=`, `&client_secret=`, ...,
 * isSecretParameter): `postgres://app@h/k?sslmode=require&password=[REDACTED]`.
 */
export function redactCredentials(text: string): string {
  return text
    .replace(URL_USERINFO, (all, scheme: string, user: string, password: string | undefined) => {
      if (password !== undefined) return `${scheme}${user}:${REDACTED}@`;
      // A lone userinfo is a token to NATS, a mere user name elsewhere (postgres://app@db).
      return TOKEN_SCHEMES.test(scheme) ? `${scheme}${REDACTED}@` : all;
    })
    .replace(QUERY_PARAM, (all, separator: string, name: string) => (isSecretParameter(name) ? `${separator}${name}=${REDACTED}` : all));
}

/**
 * `text` with `url`'s secrets (its userinfo password, its parameters named like a secret) replaced
 * wherever they stand, not only inside a URL: a driver may quote a password alone. Then every URL
 * in it masked (redactCredentials).
 */
export function redactSecretsOfUrl(text: string, url: string): string {
  let masked = text;
  try {
    const parsed = new URL(url);
    const secrets = [
      parsed.password,
      decodedName(parsed.password),
      ...[...parsed.searchParams].filter(([name]) => isSecretParameter(name)).map(([, value]) => value),
    ];
    for (const secret of secrets) {
      if (secret) masked = masked.replaceAll(secret, REDACTED);
    }
  } catch {
    // Not a URL the WHATWG parser takes (sqlite:<path>): it carries no password.
  }
  return redactCredentials(masked);
}

/**
 * Field names whose value is a secret wherever they appear in a log object, at any of the first
 * two levels (pino redaction paths). The config's secret settings are among them by name.
 */
const SECRET_FIELDS = [
  'password',
  'pass',
  'token',
  'secret',
  'seed',
  'creds',
  'authorization',
  'natsToken',
  'natsPassword',
  'PGPASSWORD',
  'NATS_TOKEN',
  'NATS_PASSWORD',
] as const;

/** pino `redact.paths` for SECRET_FIELDS at the top level and one level down. */
export function secretLogPaths(): string[] {
  return SECRET_FIELDS.flatMap((field) => [field, `*.${field}`]);
}
