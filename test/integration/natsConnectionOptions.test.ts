import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionOptions } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { resolveNatsConnection, type NatsClientSettings } from '../../src/bin/natsConnectionOptions.js';
import { checkNatsServerIdentity } from '../../src/bin/natsServerIdentity.js';

const dir = mkdtempSync(join(tmpdir(), 'pp-nats-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** The connection options alone, as most cases here read them. */
function natsConnectionOptions(settings: NatsClientSettings): ConnectionOptions {
  return resolveNatsConnection(settings).options;
}

/** What the options' authenticator sends in CONNECT (no nonce: no NKey signature asked). */
function credentialsOf(options: ConnectionOptions): unknown {
  const auth = options.authenticator;
  return typeof auth === 'function' ? auth(undefined) : undefined;
}

function problemsOf(settings: NatsClientSettings): string {
  try {
    natsConnectionOptions(settings);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).message;
  }
  throw new Error('expected a ConfigError');
}

describe('NATS connection options from the settings', () => {
  it('takes a user and password out of NATS_URL, and hands nats.js bare host:port entries', () => {
    const options = natsConnectionOptions({ natsUrl: 'nats://worker:12%40secret@10.0.0.1:4222, nats://worker:12%40secret@10.0.0.2:4223' });
    expect(options.servers).toEqual(['10.0.0.1:4222', '10.0.0.2:4223']);
    expect(credentialsOf(options)).toEqual({ user: 'worker', pass: '12@secret' });
    expect(options.tls).toBeUndefined();
  });

  it('reads a lone userinfo as a token, and requires TLS for tls:// URLs', () => {
    const options = natsConnectionOptions({ natsUrl: 'tls://s3cr3t-token@nats.internal:4222' });
    expect(credentialsOf(options)).toEqual({ auth_token: 's3cr3t-token' });
    expect(options.tls).toEqual({ checkServerIdentity: checkNatsServerIdentity });
  });

  it('reads the token and the password from their files, without the trailing newline', () => {
    expect(credentialsOf(natsConnectionOptions({ natsUrl: 'nats://h:4222', natsTokenFile: file('token', 'tok-from-file\n') }))).toEqual({
      auth_token: 'tok-from-file',
    });
    const options = natsConnectionOptions({
      natsUrl: 'nats://h:4222',
      natsUser: 'ops',
      natsPasswordFile: file('password', 'pw-from-file\n'),
      natsInboxPrefix: '_INBOX_ops',
    });
    expect(credentialsOf(options)).toEqual({ user: 'ops', pass: 'pw-from-file' });
    expect(options.inboxPrefix).toBe('_INBOX_ops');
  });

  it('passes the TLS files to nats.js, and asks for TLS when only a CA is given', () => {
    const ca = file('ca.pem', 'not parsed here');
    const cert = file('cert.pem', 'x');
    const key = file('key.pem', 'x');
    expect(natsConnectionOptions({ natsUrl: 'nats://h:4222', natsTlsCaFile: ca }).tls).toEqual({ caFile: ca, checkServerIdentity: checkNatsServerIdentity });
    expect(natsConnectionOptions({ natsUrl: 'tls://h:4222', natsTlsCaFile: ca, natsTlsCertFile: cert, natsTlsKeyFile: key }).tls).toEqual({
      caFile: ca,
      certFile: cert,
      keyFile: key,
      checkServerIdentity: checkNatsServerIdentity,
    });
  });

  it('lists every problem at once, naming settings and paths but never a secret', () => {
    const message = problemsOf({
      natsUrl: 'nats://worker:url-secret@h:4222',
      natsToken: 'token-secret',
      natsPasswordFile: join(dir, 'missing'),
      natsTlsCertFile: file('lonely-cert.pem', 'x'),
    });
    expect(message).toContain('NATS_PASSWORD / NATS_PASSWORD_FILE is set without NATS_USER');
    expect(message).toContain(`NATS_PASSWORD_FILE / --nats-password-file: cannot read ${JSON.stringify(join(dir, 'missing'))} (ENOENT)`);
    expect(message).toContain('NATS authentication is given 3 ways');
    expect(message).toContain('NATS_TLS_CERT_FILE and NATS_TLS_KEY_FILE go together');
    expect(message).not.toMatch(/url-secret|token-secret/);
  });

  it('refuses a scheme other than nats:// and tls://, and servers with different credentials, without echoing them', () => {
    expect(problemsOf({ natsUrl: 'http://u:http-secret@h:4222' })).toMatch(/scheme "http" is not nats:\/\/ or tls:\/\//);
    const message = problemsOf({ natsUrl: 'nats://a:one-secret@h1:4222,nats://a:two-secret@h2:4222' });
    expect(message).toContain('the servers carry different credentials');
    expect(message).not.toMatch(/one-secret|two-secret/);
  });
});
