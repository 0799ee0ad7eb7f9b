import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigError, isSecretSetting, loadConfig, SETTINGS, type SettingName } from '../../src/config.js';
import { describeSettings } from '../../src/describeSettings.js';
import { createLogger } from '../../src/logger.js';
import { createDatabase } from '../../src/repository/database.js';
import { isSecretParameter, redactCredentials } from '../../src/redaction.js';

const SECRET = 'hunter2-s3cret';

/** Every line a logger writes, as text. */
function capturedLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger('debug', sink), text: () => lines.join('') };
}

describe('credentials inside URLs', () => {
  it.each([
    [`postgres://app:${SECRET}@db.internal:5432/kandev`, 'postgres://app:[REDACTED]@db.internal:5432/kandev'],
    [
      `nats://worker:${SECRET}@10.0.0.1:4222,nats://worker:${SECRET}@10.0.0.2:4222`,
      'nats://worker:[REDACTED]@10.0.0.1:4222,nats://worker:[REDACTED]@10.0.0.2:4222',
    ],
    [`tls://${SECRET}@nats:4222`, 'tls://[REDACTED]@nats:4222'],
    [`postgres://app@db/kandev?sslmode=verify-full&password=${SECRET}`, 'postgres://app@db/kandev?sslmode=verify-full&password=[REDACTED]'],
    [`connect to postgres://app:${SECRET}@db/k failed: ECONNREFUSED`, 'connect to postgres://app:[REDACTED]@db/k failed: ECONNREFUSED'],
  ])('masks %s', (text, masked) => {
    expect(redactCredentials(text)).toBe(masked);
  });

  it.each([
    [`postgres://u@h/db?password=${SECRET}`, 'postgres://u@h/db?password=[REDACTED]'],
    [
      `postgres://u@h/db?sslmode=require&sslpassword=${SECRET}&application_name=pp`,
      'postgres://u@h/db?sslmode=require&sslpassword=[REDACTED]&application_name=pp',
    ],
    // pg-connection-string decodes parameter names: the driver reads this one as the password.
    [`postgres://u@h/db?pass%77ord=${SECRET}`, 'postgres://u@h/db?pass%77ord=[REDACTED]'],
    [`postgres://u@h/db?PASSWORD=${SECRET}#x`, 'postgres://u@h/db?PASSWORD=[REDACTED]#x'],
    [
      `https://h/x?access_token=${SECRET}&client_secret=${SECRET}&api_key=${SECRET}&page=2`,
      'https://h/x?access_token=[REDACTED]&client_secret=[REDACTED]&api_key=[REDACTED]&page=2',
    ],
    [`nats://h:4222?token=${SECRET}`, 'nats://h:4222?token=[REDACTED]'],
    [`mysql://app:${SECRET}@db/k?password=${SECRET}&sslmode=require`, 'mysql://app:[REDACTED]@db/k?password=[REDACTED]&sslmode=require'],
  ])('masks the query parameters of %s that carry a secret', (text, masked) => {
    expect(redactCredentials(text)).toBe(masked);
  });

  it('names as secret the parameters that hold one, and not the paths and settings beside them', () => {
    for (const name of [
      'password',
      'sslpassword',
      'Password',
      'pass%77ord',
      'passwd',
      'pwd',
      'pass',
      'token',
      'access_token',
      'auth_token',
      'secret',
      'client_secret',
      'api_key',
      'apikey',
      'key',
      'jwt',
      'nkey',
      'seed',
    ]) {
      expect(isSecretParameter(name), name).toBe(true);
    }
    for (const name of ['sslmode', 'sslrootcert', 'sslkey', 'sslcert', 'passfile', 'application_name', 'user', 'passthrough', 'page', '%E0%A4%A']) {
      expect(isSecretParameter(name), name).toBe(false);
    }
  });

  it('keeps a JSON log line JSON: a URL quoted inside a message is masked up to its escaped quote', () => {
    const line = JSON.stringify({ msg: `unsupported DATABASE_URL ${JSON.stringify(`mysql://u@h/db?password=${SECRET}`)}: use sqlite:<path>`, next: 'field' });
    const masked = redactCredentials(line);
    expect(masked).not.toContain(SECRET);
    expect(JSON.parse(masked)).toEqual({ msg: 'unsupported DATABASE_URL "mysql://u@h/db?password=[REDACTED]": use sqlite:<path>', next: 'field' });
  });

  it('describes a PostgreSQL database without the password of its URL, in userinfo or parameters', async () => {
    for (const url of [`postgres://app:${SECRET}@127.0.0.1:1/k`, `postgres://app@127.0.0.1:1/k?sslmode=disable&password=${SECRET}`]) {
      const db = createDatabase(url);
      try {
        expect(db.description).not.toContain(SECRET);
        expect(db.description).toContain('[REDACTED]');
      } finally {
        await db.destroy();
      }
    }
  });

  it('leaves URLs without credentials, and SQLite paths, as they are', () => {
    for (const text of ['nats://127.0.0.1:4222', 'postgres://app@db:5432/kandev?sslmode=require', 'sqlite:./data/pending-projector.db', 'sqlite::memory:']) {
      expect(redactCredentials(text)).toBe(text);
    }
  });
});

describe('the logger', () => {
  it('never writes a secret setting, a password inside DATABASE_URL or NATS_URL, or a secret in an error', () => {
    const { logger, text } = capturedLogger();
    const child = logger.child({ component: 'test', databaseUrl: `postgres://app:${SECRET}@db/kandev` });
    child.info(
      { natsPassword: SECRET, natsToken: SECRET, config: { natsPassword: SECRET, password: SECRET, natsUrl: `nats://worker:${SECRET}@nats:4222` } },
      'settings',
    );
    child.warn(`could not reach nats://worker:${SECRET}@nats:4222`);
    child.error({ err: new Error(`password authentication failed for postgres://app:${SECRET}@db/kandev`) }, 'database failed');
    child.error({ err: new AggregateError([new Error(`nats://${SECRET}@nats:4222 refused`)], 'several') }, 'nested');
    const written = text();
    expect(written).not.toContain(SECRET);
    expect(written.match(/\[REDACTED\]/g)?.length).toBeGreaterThanOrEqual(7);
    // What is not secret stays readable.
    expect(written).toContain('postgres://app:[REDACTED]@db/kandev');
    expect(written).toContain('"msg":"database failed"');
  });
});

describe('secret settings in config errors and help', () => {
  const secrets = (Object.keys(SETTINGS) as SettingName[]).filter(isSecretSetting);

  it('marks the token and the password secret, and no path or name', () => {
    expect(secrets.sort()).toEqual(['natsPassword', 'natsToken']);
  });

  it('names a bad secret setting and how to set it, without its value', () => {
    let error: unknown;
    try {
      loadConfig({}, { NATS_PASSWORD: `${SECRET}\n`, NATS_TOKEN: `a\n${SECRET}` }, secrets);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    expect(message).toContain('NATS_PASSWORD / --nats-password');
    expect(message).toContain('NATS_TOKEN / --nats-token');
    expect(message).toContain('(from NATS_PASSWORD)');
    expect(message).not.toContain(SECRET);
  });

  it('shows the names of the secret settings in help, and no value or default for them', () => {
    const help = describeSettings([...secrets, 'natsTokenFile', 'natsPasswordFile', 'natsUrl']);
    for (const name of ['NATS_TOKEN', '--nats-token', 'NATS_PASSWORD', '--nats-password', 'NATS_PASSWORD_FILE']) expect(help).toContain(name);
    expect(help.match(/secret, never shown/g)).toHaveLength(2);
  });
});
