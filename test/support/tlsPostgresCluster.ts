import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './freePort.js';

const run = promisify(execFile);

/**
 * A private PostgreSQL cluster that only takes TLS connections, for the tests of `sslmode`:
 * `initdb` into a temporary directory, a throwaway CA and a server certificate made with openssl,
 * `ssl = on`, `pg_hba.conf` with `hostssl` (password) only, on 127.0.0.1 and a free port.
 * `fsync = off`: the cluster is thrown away, so durability buys nothing and costs start-up time.
 */
export interface TlsPostgresCluster {
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
  /** The CA that signed the server certificate. */
  readonly caFile: string;
  /** A CA that did not: verify-ca and verify-full against it must fail. */
  readonly otherCaFile: string;
  /** A file holding `password` followed by a newline, as secret stores write it. */
  readonly passwordFile: string;
  /** `postgres://user@host:port/db?query`, the password given some other way. */
  url(host: string, query: string): string;
  stop(): Promise<void>;
}

/**
 * The host names the server certificate carries: only the IP address. `localhost` reaches the
 * same server (it resolves to 127.0.0.1) but is not in the certificate, which is what tells
 * verify-ca (chain only) from verify-full (chain and name).
 */
export const CERTIFIED_HOST = '127.0.0.1';
export const UNCERTIFIED_HOST = 'localhost';

/** Where initdb and pg_ctl are: the newest /usr/lib/postgresql/<v>/bin, else the PATH. */
export function findPostgresBinaries(): string | undefined {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  for (const v of versions) {
    const dir = path.join(root, v, 'bin');
    if (fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  }
  return findOnPath('initdb') && findOnPath('pg_ctl') ? path.dirname(findOnPath('initdb')!) : undefined;
}

export function findOnPath(program: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, program);
    if (dir && fs.existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * PostgreSQL refuses to run as root: under root (containers, CI) the cluster's files belong to,
 * and its programs run as, the `postgres` account (or `nobody`).
 */
async function clusterOwner(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const uid = Number((await run('id', ['-u', name])).stdout.trim());
      const gid = Number((await run('id', ['-g', name])).stdout.trim());
      return { uid, gid };
    } catch {
      // no such account: try the next
    }
  }
  throw new Error('running as root, and neither a postgres nor a nobody account exists to run PostgreSQL as');
}

async function makeCertificates(dir: string): Promise<void> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const openssl = (args: string[]) => run('openssl', args, { cwd: dir });
  const ca = (name: string) =>
    openssl([
      'req',
      '-x509',
      ...ec,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=pending-projector test ${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  await Promise.all([ca('ca'), ca('other-ca')]);
  await openssl(['req', '-new', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=pending-projector test server']);
  fs.writeFileSync(
    path.join(dir, 'server.ext'),
    `subjectAltName=IP:${CERTIFIED_HOST}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`,
  );
  await openssl([
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.crt',
    '-days',
    '2',
    '-extfile',
    'server.ext',
  ]);
  fs.chmodSync(path.join(dir, 'server.key'), 0o600);
}

/** Starts the cluster; `stop()` shuts it down and removes every file it made. */
export async function startTlsPostgresCluster(binDir: string): Promise<TlsPostgresCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-pgtls-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'postgres.log');
  const user = 'pp_tls';
  // Characters that need escaping in a URL, so the password's path through the driver is tested.
  const password = `s3cret:p@ss/w%rd ${Math.random().toString(36).slice(2)}`;
  const owner = await clusterOwner();
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {};
  let started = false;
  const stop = async () => {
    if (started) {
      started = false;
      await run(path.join(binDir, 'pg_ctl'), ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], asOwner).catch(() => undefined);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await makeCertificates(dir);
    fs.writeFileSync(path.join(dir, 'pwfile'), `${password}\n`);
    fs.writeFileSync(path.join(dir, 'password'), `${password}\n`);
    if (owner) {
      for (const file of ['.', 'server.key', 'server.crt', 'pwfile']) fs.chownSync(path.join(dir, file), owner.uid, owner.gid);
    }
    await run(
      path.join(binDir, 'initdb'),
      [
        '-D',
        dataDir,
        '-U',
        user,
        `--pwfile=${path.join(dir, 'pwfile')}`,
        '-A',
        'scram-sha-256',
        '--auth-local=trust',
        '-E',
        'UTF8',
        '--no-sync',
        '--no-instructions',
      ],
      asOwner,
    );
    const port = await freePort();
    fs.appendFileSync(
      path.join(dataDir, 'postgresql.conf'),
      [
        `listen_addresses = '127.0.0.1'`,
        `port = ${port}`,
        `unix_socket_directories = '${dir}'`,
        `ssl = on`,
        `ssl_cert_file = '${path.join(dir, 'server.crt')}'`,
        `ssl_key_file = '${path.join(dir, 'server.key')}'`,
        `fsync = off`,
        `synchronous_commit = off`,
        `full_page_writes = off`,
        `max_connections = 40`,
        `shared_buffers = 16MB`,
        // pg leaves the socket open after it gives up on SCRAM for want of a password; the server
        // closes it only at this timeout (default 1 min), and the pool's destroy waits for that.
        `authentication_timeout = 5s`,
        '',
      ].join('\n'),
    );
    // TLS or nothing over TCP; the socket (trust) is only for whoever administers the cluster.
    fs.writeFileSync(
      path.join(dataDir, 'pg_hba.conf'),
      ['local all all trust', 'hostnossl all all 0.0.0.0/0 reject', `hostssl all all ${CERTIFIED_HOST}/32 scram-sha-256`, ''].join('\n'),
    );
    await run(path.join(binDir, 'pg_ctl'), ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start'], asOwner);
    started = true;
    return {
      port,
      user,
      password,
      database: 'postgres',
      caFile: path.join(dir, 'ca.crt'),
      otherCaFile: path.join(dir, 'other-ca.crt'),
      passwordFile: path.join(dir, 'password'),
      url: (host, query) => `postgres://${user}@${host}:${port}/postgres${query ? `?${query}` : ''}`,
      stop,
    };
  } catch (err) {
    const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
    await stop();
    throw new Error(`could not start the TLS PostgreSQL cluster: ${(err as Error).message}${log ? `\n${log}` : ''}`, { cause: err });
  }
}
