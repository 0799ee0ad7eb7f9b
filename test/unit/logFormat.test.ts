import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createLogger, resolveLogFormat, type LogFormat } from '../../src/logger.js';

const SECRET = 'hunter2-s3cret';

function capturedLogger(format: LogFormat) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger('debug', { destination: sink, format }), lines };
}

describe('LOG_FORMAT', () => {
  it('is pretty on a terminal and JSON otherwise when auto, and what it says when forced', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('is read from the environment and the flag, defaults to auto, and refuses anything else by name', () => {
    expect(loadConfig({}, {}, ['logFormat']).logFormat).toBe('auto');
    expect(loadConfig({}, { LOG_FORMAT: 'pretty' }, ['logFormat']).logFormat).toBe('pretty');
    expect(loadConfig({ 'log-format': 'json' }, { LOG_FORMAT: 'pretty' }, ['logFormat']).logFormat).toBe('json');
    expect(() => loadConfig({}, { LOG_FORMAT: 'text' }, ['logFormat'])).toThrow(ConfigError);
    expect(() => loadConfig({}, { LOG_FORMAT: 'text' }, ['logFormat'])).toThrow(/LOG_FORMAT \/ --log-format = "text"/);
  });

  it('pretty: one readable line per entry with its level, component, message and fields, not JSON', () => {
    const { logger, lines } = capturedLogger('pretty');
    logger.child({ component: 'worker' }).info({ healthPort: 9464 }, 'worker started');
    expect(lines).toHaveLength(1);
    expect(() => JSON.parse(lines[0]!)).toThrow();
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \(worker\) worker started \{"healthPort":9464\}\n$/);
  });

  it('json: one JSON object per line, as before', () => {
    const { logger, lines } = capturedLogger('json');
    logger.child({ component: 'worker' }).info({ healthPort: 9464 }, 'worker started');
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 30, component: 'worker', healthPort: 9464, msg: 'worker started', service: 'pending-projector' });
  });

  it.each(['pretty', 'json'] as const)('%s: masks a secret in a logged URL wherever it stands, and censors secret fields', (format) => {
    const { logger, lines } = capturedLogger(format);
    const url = `postgres://app:${SECRET}@db.internal:5432/kandev?sslpassword=${SECRET}`;
    logger.child({ component: 'db', database: url }).warn({ nats: `nats://${SECRET}@10.0.0.1:4222`, natsPassword: SECRET }, `could not reach ${url}`);
    logger.error({ err: new Error(`connect to nats://worker:${SECRET}@nats:4222 failed`) }, 'NATS failed');
    const text = lines.join('');
    expect(text).not.toContain(SECRET);
    expect(text).toContain('postgres://app:[REDACTED]@db.internal:5432/kandev?sslpassword=[REDACTED]');
    expect(text).toContain('nats://[REDACTED]@10.0.0.1:4222');
    expect(text).toContain('nats://worker:[REDACTED]@nats:4222');
  });

  it('pretty: an error keeps its stack, masked', () => {
    const { logger, lines } = capturedLogger('pretty');
    logger.error({ err: new Error(`boom at tls://${SECRET}@nats:4222`) }, 'failed');
    expect(lines.join('')).toMatch(/Error: boom at tls:\/\/\[REDACTED\]@nats:4222\n\s+at /);
  });
});
