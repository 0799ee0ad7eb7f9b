import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REQUIRE_INTEGRATION } from './services.js';
import { freePort } from './freePort.js';

/**
 * Private nats-server processes for tests that need a server of their own configuration (users,
 * permissions, TLS), on a free loopback port, with a temporary JetStream store removed on stop.
 */

/** The nats-server binary: NATS_SERVER_BIN, or the first on PATH; undefined when there is none. */
export function natsServerBinary(): string | undefined {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  try {
    return execFileSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether this run can start private servers. Under a truthy CI or REQUIRE_INTEGRATION a missing
 * binary throws, so the tests that need it fail instead of being skipped.
 */
export function privateNatsAvailable(): boolean {
  const found = natsServerBinary() !== undefined;
  if (!found && REQUIRE_INTEGRATION)
    throw new Error('nats-server is not installed (or NATS_SERVER_BIN not set), and CI / REQUIRE_INTEGRATION require the tests that start one');
  return found;
}

export interface ServerTls {
  certFile: string;
  keyFile: string;
  caFile: string;
  /** Clients must present a certificate the CA signed. */
  verify: boolean;
}

export interface PrivateNats {
  readonly port: number;
  /** `nats://127.0.0.1:<port>`, or `tls://...` when started with TLS. */
  readonly url: string;
  output(): string;
  stop(): Promise<void>;
  /** SIGTERM the server and wait for its exit, keeping its store and ports for `resume()`. */
  halt(): Promise<void>;
  /** Starts the server again on the same configuration, ports and store (an operator's restart). */
  resume(): Promise<void>;
}

/**
 * Starts nats-server on the configuration `configText(storeDir)` returns (its JetStream store must be
 * `storeDir`, a temporary directory removed on stop), with `env` added to the server's environment
 * (the variables the configuration references), listening on 127.0.0.1 at a free port: the
 * command line overrides the file's listen address, and adds TLS. Includes are relative to the
 * configuration's directory: `files` are written there.
 */
/** The max_payload private servers get unless a test says otherwise: the shipped configuration's, which carries the worker's largest message. */
export const NATS_TEST_MAX_PAYLOAD = 8 * 1024 * 1024;

export async function startPrivateNats(
  configText: (storeDir: string) => string,
  env: Record<string, string>,
  options: {
    tls?: ServerTls;
    /** Files beside the configuration (its includes), by name. */
    files?: Record<string, string>;
    /** The server's max_payload, when the configuration sets none (default NATS_TEST_MAX_PAYLOAD). */
    maxPayload?: number;
  } = {},
): Promise<PrivateNats> {
  const { tls } = options;
  const binary = natsServerBinary();
  if (!binary) throw new Error('nats-server is not installed');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'pp-nats-'));
  const configFile = join(dir, 'nats-server.conf');
  const text = configText(join(dir, 'jetstream'));
  writeFileSync(configFile, /^\s*max_payload\s*:/m.test(text) ? text : `max_payload: ${options.maxPayload ?? NATS_TEST_MAX_PAYLOAD}\n${text}`);
  for (const [name, text] of Object.entries(options.files ?? {})) writeFileSync(join(dir, name), text);
  const args = ['-c', configFile, '-a', '127.0.0.1', '-p', String(port)];
  if (tls) args.push('--tls', '--tlscert', tls.certFile, '--tlskey', tls.keyFile, '--tlscacert', tls.caFile, ...(tls.verify ? ['--tlsverify'] : []));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let out = '';
  const launch = async () => {
    const proc = spawn(binary, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    const mark = out.length;
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        out += d.toString();
        if (out.includes('Server is ready', mark)) resolve();
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      void exited.then(() => reject(new Error(`nats-server exited before it was ready:\n${out}`)));
    });
  };
  const halt = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  };
  await launch();
  return {
    port,
    url: `${tls ? 'tls' : 'nats'}://127.0.0.1:${port}`,
    output: () => out,
    halt,
    resume: launch,
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TestCertificates {
  dir: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  remove(): void;
}

/**
 * A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, made by openssl
 * into a temporary directory: certificates are generated for each run, never committed.
 */
export function generateCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'pp-certs-'));
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=pending-projector test CA', '-keyout', 'ca-key.pem', '-out', 'ca.pem');
  writeFileSync(at('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  writeFileSync(at('client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, cn] of [
    ['server', '127.0.0.1'],
    ['client', 'worker'],
  ] as const) {
    signCertificate(dir, name, `/CN=${cn}`);
  }
  return {
    dir,
    caFile: at('ca.pem'),
    serverCertFile: at('server.pem'),
    serverKeyFile: at('server-key.pem'),
    clientCertFile: at('client.pem'),
    clientKeyFile: at('client-key.pem'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A key and certificate `<name>-key.pem` / `<name>.pem` for `subject`, signed by the CA in `dir` with the extensions of `<name>.ext`. */
function signCertificate(dir: string, name: string, subject: string): void {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', `${name}-key.pem`, '-out', `${name}.csr`);
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  );
}

/**
 * Another server certificate from the CA of `certs`, whose subjectAltName is `san` alone (e.g.
 * `IP:127.0.0.1` or `DNS:localhost`), written beside the others as `<name>.pem` and `<name>-key.pem`.
 * Its CN names nothing a client checks, so the SAN is all that identifies it.
 */
export function generateServerCertificate(certs: TestCertificates, name: string, san: string): { certFile: string; keyFile: string } {
  writeFileSync(join(certs.dir, `${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  signCertificate(certs.dir, name, `/CN=${name} test server`);
  return { certFile: join(certs.dir, `${name}.pem`), keyFile: join(certs.dir, `${name}-key.pem`) };
}
