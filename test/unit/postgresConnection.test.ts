import { describe, expect, it } from 'vitest';
import { DatabaseUrlError } from '../../src/repository/databaseUrlError.js';
import { postgresConnection } from '../../src/repository/postgresConnection.js';

// What reaches the driver for URLs whose TLS settings need no file; the modes that read a root
// certificate, and what each one accepts and refuses, are tested against a real server
// (test/e2e/postgresTls.test.ts).
const refusal = (url: string, options: { password?: string } = {}): string => {
  try {
    postgresConnection(url, options);
  } catch (err) {
    expect(err).toBeInstanceOf(DatabaseUrlError);
    return (err as Error).message;
  }
  throw new Error('expected a DatabaseUrlError');
};

describe('the PostgreSQL connection settings of a DATABASE_URL', () => {
  it('hands a URL without TLS parameters or password file to the driver exactly as given, without TLS', () => {
    const url = 'postgres://app@db:5432/kandev?options=-c search_path=x&application_name=pp';
    expect(postgresConnection(url)).toEqual({ connectionString: url, ssl: false, sslMode: 'disable' });
  });

  it('takes sslmode out of the URL, keeping the other parameters, so the driver cannot give it its own meaning', () => {
    const { connectionString, ssl, sslMode } = postgresConnection('postgres://app@db/kandev?sslmode=require&application_name=pp');
    expect(connectionString).toBe('postgres://app@db/kandev?application_name=pp');
    expect(sslMode).toBe('require');
    expect(ssl).toEqual({ rejectUnauthorized: false });
  });

  it('trusts the platform roots for verify-full with sslrootcert=system, and refuses system with a weaker mode', () => {
    expect(postgresConnection('postgres://app@db/kandev?sslmode=verify-full&sslrootcert=system').ssl).toEqual({});
    expect(refusal('postgres://app@db/kandev?sslmode=require&sslrootcert=system')).toMatch(/sslrootcert=system needs sslmode=verify-full/);
  });

  it('refuses verification without a root certificate, modes that fall back to plaintext, and parameters the driver would read its own way', () => {
    expect(refusal('postgres://app@db/kandev?sslmode=verify-ca')).toMatch(/verify-ca needs sslrootcert/);
    expect(refusal('postgres://app@db/kandev?sslmode=verify-full')).toMatch(/verify-full needs sslrootcert/);
    expect(refusal('postgres://app@db/kandev?sslmode=prefer')).toMatch(/falls back to plaintext/);
    expect(refusal('postgres://app@db/kandev?sslmode=no-verify')).toMatch(/use one of disable, require, verify-ca, verify-full/);
    expect(refusal('postgres://app@db/kandev?ssl=true')).toMatch(/parameter ssl is not supported/);
    expect(refusal('postgres://app@db/kandev?sslmode=require&uselibpqcompat=true')).toMatch(/uselibpqcompat/);
    expect(refusal('postgres://app@db/kandev?sslcert=/c.pem')).toMatch(/client certificates/);
  });

  it('passes a file password as the password parameter, and refuses a URL that already carries one', () => {
    expect(postgresConnection('postgres://app@db/kandev', { password: 'p@ss w&rd' }).connectionString).toBe('postgres://app@db/kandev?password=p%40ss+w%26rd');
    expect(refusal('postgres://app:inline@db/kandev', { password: 'x' })).toMatch(/give the password in one place/);
    expect(refusal('postgres://app@db/kandev?password=inline', { password: 'x' })).toMatch(/give the password in one place/);
  });

  it('never puts the password in a refusal', () => {
    expect(refusal('postgres://app:inline-secret@db/kandev?sslmode=prefer')).not.toContain('inline-secret');
    expect(refusal('postgres://app:inline-secret@db/kandev', { password: 'file-secret' })).not.toMatch(/secret/);
  });
});
