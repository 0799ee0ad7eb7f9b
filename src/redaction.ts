/**
 * The one rule for keeping secrets out of text a person reads (logs, config errors, `--help`,
 * stderr): credentials inside URLs are masked, and fields that carry a secret are censored.
 * Dependency-free, so the logger, the config and the CLI share it.
 */

export const REDACTED = '[REDACTED]';

// `scheme://user:password@` (the password part) and `scheme://token@` (a lone userinfo is a token
// for NATS); `password=...` query parameters of PostgreSQL URLs. A `"` ends a match: it never
// stands raw in a URL, and it ends a JSON string, so masking a log line never reaches into the
// next field.
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:"]*)(?::([^\s/@"]*))?@/gi;
const TOKEN_SCHEMES = /^(nats|tls|ws|wss):\/\/$/i;
const PASSWORD_PARAM = /([?&](?:password|sslpassword|token)=)[^&\s#"]*/gi;

/**
 * `text` with every URL's userinfo secret replaced: `nats://user:pw@h` becomes
 * `nats://user:[REDACTED]@h`, and `nats://token@h` becomes `nats://[REDACTED]@h` (but
 * `postgres://app@h` keeps its user name).
 */
export function redactCredentials(text: string): string {
  return text
    .replace(URL_USERINFO, (all, scheme: string, user: string, password: string | undefined) => {
      if (password !== undefined) return `${scheme}${user}:${REDACTED}@`;
      // A lone userinfo is a token to NATS, a mere user name elsewhere (postgres://app@db).
      return TOKEN_SCHEMES.test(scheme) ? `${scheme}${REDACTED}@` : all;
    })
    .replace(PASSWORD_PARAM, `$1${REDACTED}`);
}

/**
 * Field names whose value is a secret wherever they appear in a log object, at any of the first
 * two levels (pino redaction paths). The config's secret settings are among them by name.
 */
export const SECRET_FIELDS = ['password', 'pass', 'token', 'secret', 'seed', 'creds', 'authorization', 'natsToken', 'natsPassword', 'PGPASSWORD', 'NATS_TOKEN', 'NATS_PASSWORD'] as const;

/** pino `redact.paths` for SECRET_FIELDS at the top level and one level down. */
export function secretLogPaths(): string[] {
  return SECRET_FIELDS.flatMap((field) => [field, `*.${field}`]);
}
