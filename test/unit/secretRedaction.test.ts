import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigError, describeSettings, isSecretSetting, loadConfig, SETTINGS, type SettingName } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { redactCredentials } from '../../src/redaction.js';

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
    [`nats://worker:${SECRET}@10.0.0.1:4222,nats://worker:${SECRET}@10.0.0.2:4222`, 'nats://worker:[REDACTED]@10.0.0.1:4222,nats://worker:[REDACTED]@10.0.0.2:4222'],
    [`tls://${SECRET}@nats:4222`, 'tls://[REDACTED]@nats:4222'],
    [`postgres://app@db/kandev?sslmode=verify-full&password=${SECRET}`, 'postgres://app@db/kandev?sslmode=verify-full&password=[REDACTED]'],
    [`connect to postgres://app:${SECRET}@db/k failed: ECONNREFUSED`, 'connect to postgres://app:[REDACTED]@db/k failed: ECONNREFUSED'],
  ])('masks %s', (text, masked) => {
    expect(redactCredentials(text)).toBe(masked);
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
    child.info({ natsPassword: SECRET, natsToken: SECRET, config: { natsPassword: SECRET, password: SECRET, natsUrl: `nats://worker:${SECRET}@nats:4222` } }, 'settings');
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
