import { describe, expect, it } from 'vitest';
import { databaseConnectionFailure, natsConnectionFailure } from '../../src/bin/connectionFailure.js';

const coded = (message: string, code: string, cause?: unknown) => Object.assign(new Error(message, { cause }), { code });
const named = (name: string, message: string, cause?: unknown) => Object.assign(new Error(message, { cause }), { name });
const same = (text: string) => text;

describe('a failed connection, classified', () => {
  it.each([
    ['a refused NATS connection', named('ConnectionError', 'connection refused', coded('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED')), 'unreachable', 3],
    ['an unknown NATS host', coded('getaddrinfo ENOTFOUND nats.invalid', 'ENOTFOUND'), 'unreachable', 3],
    ['a NATS server without TLS', named('ConnectionError', "server does not support 'tls'"), 'tls', 2],
    ['a certificate for another host', coded("Hostname/IP does not match certificate's altnames", 'ERR_TLS_CERT_ALTNAME_INVALID'), 'tls', 2],
    ['a certificate of an unknown CA', coded('unable to verify the first certificate', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'), 'tls', 2],
  ])('NATS: %s is %s, exit %i', (_what, err, kind, exitCode) => {
    const failure = natsConnectionFailure(err, 'nats://h:1', same);
    expect(failure).toMatchObject({ kind, exitCode });
    expect(failure.message).toContain('(NATS_URL / --nats-url)');
    expect(failure.message).not.toContain('\n');
  });

  it.each([
    ['a refused connection', coded('connect ECONNREFUSED 127.0.0.1:5999', 'ECONNREFUSED'), 'unreachable', 3],
    ['a server starting up', coded('the database system is starting up', '57P03'), 'unreachable', 3],
    ['a wrong password', coded('password authentication failed for user "app"', '28P01'), 'credentials', 2],
    ['no password given', new Error('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string'), 'credentials', 2],
    ['pg_hba refusing plain connections', coded('no pg_hba.conf entry for host "1.2.3.4", user "app", database "k", no encryption', '28000'), 'tls', 2],
    ['a server without TLS', new Error('The server does not support SSL connections'), 'tls', 2],
    ['a database that does not exist', coded('database "k" does not exist', '3D000'), 'configuration', 2],
    ['a file that is not a database', coded('file is not a database', 'SQLITE_NOTADB'), 'configuration', 2],
    ['something else', new Error('out of cheese'), 'other', 1],
  ])('the database: %s is %s, exit %i', (_what, err, kind, exitCode) => {
    const failure = databaseConnectionFailure(err, 'postgres://app@h/k', same);
    expect(failure).toMatchObject({ kind, exitCode });
    expect(failure.message).toMatch(/^[a-zA-Z ]+ the database at postgres:\/\/app@h\/k \(DATABASE_URL \/ --database-url\): /);
  });

  it('masks what the driver quotes with the mask it is given', () => {
    const failure = databaseConnectionFailure(coded('password hunter2 refused', '28P01'), 'postgres://app@h/k', (t) => t.replace('hunter2', '[REDACTED]'));
    expect(failure.message).not.toContain('hunter2');
  });
});
