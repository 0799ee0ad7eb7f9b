import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats } from '../../src/bin/connectNats.js';
import { runCli } from '../support/cliProcess.js';
import {
  generateCertificates,
  generateServerCertificate,
  privateNatsAvailable,
  startPrivateNats,
  type PrivateNats,
  type TestCertificates,
} from '../support/privateNats.js';

// Two servers of one CA: one whose certificate names only the IP 127.0.0.1, one whose certificate
// names only localhost. Whatever NATS_URL says, name or IP, is what each certificate must name.
describe.skipIf(!privateNatsAvailable())('the NATS server certificate is checked against the host NATS_URL gives it', () => {
  let certs: TestCertificates;
  let byIp: PrivateNats;
  let byName: PrivateNats;
  const started: PrivateNats[] = [];

  async function serverWith(cert: { certFile: string; keyFile: string }): Promise<PrivateNats> {
    const server = await startPrivateNats(() => '# TLS only\n', {}, { tls: { ...cert, caFile: certs.caFile, verify: false } });
    started.push(server);
    return server;
  }

  /** Connects through the service's own connectNats, makes one round trip, and closes. */
  async function roundTrip(natsUrl: string): Promise<void> {
    const nc = await connectNats({ natsUrl, natsTlsCaFile: certs.caFile }, 'test-tls-identity');
    try {
      await nc.flush();
    } finally {
      await nc.close();
    }
  }

  beforeAll(async () => {
    certs = generateCertificates();
    const ipCert = generateServerCertificate(certs, 'ip-only', 'IP:127.0.0.1');
    const nameCert = generateServerCertificate(certs, 'name-only', 'DNS:localhost');
    byIp = await serverWith(ipCert);
    byName = await serverWith(nameCert);
  });
  afterAll(async () => {
    await Promise.all(started.map((s) => s.stop()));
    certs?.remove();
  });

  it('accepts a certificate naming the IP through tls://127.0.0.1', async () => {
    await expect(roundTrip(`tls://127.0.0.1:${byIp.port}`)).resolves.toBeUndefined();
  });

  it('refuses a certificate naming only localhost through tls://127.0.0.1', async () => {
    await expect(roundTrip(`tls://127.0.0.1:${byName.port}`)).rejects.toThrow(/IP: 127\.0\.0\.1 is not in the cert's list/);
  });

  it('accepts a certificate naming localhost through tls://localhost, and refuses one naming only the IP there', async () => {
    await expect(roundTrip(`tls://localhost:${byName.port}`)).resolves.toBeUndefined();
    await expect(roundTrip(`tls://localhost:${byIp.port}`)).rejects.toThrow(/Host: localhost/);
  });

  it('exits 2 through the CLI on a refused certificate, in one line naming NATS_URL and the host', async () => {
    const run = await runCli(['dead-letters', 'list'], { NATS_URL: `tls://127.0.0.1:${byName.port}`, NATS_TLS_CA_FILE: certs.caFile });
    expect(run.status).toBe(2);
    const line = run.stderr.trimEnd();
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain(`TLS refused with NATS at tls://127.0.0.1:${byName.port} (NATS_URL / --nats-url)`);
    expect(line).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/);
  });

  it('checks each server of a list against its own host: a list naming each by the other host is refused', async () => {
    await expect(roundTrip(`tls://localhost:${byIp.port},tls://127.0.0.1:${byName.port}`)).rejects.toThrow();
  });

  it('checks each server of a list against its own host: each named by its certificate is accepted, first and after a failover', async () => {
    const first = await serverWith(generateServerCertificate(certs, 'first-ip', 'IP:127.0.0.1'));
    const second = await serverWith(generateServerCertificate(certs, 'second-name', 'DNS:localhost'));
    const nc: NatsConnection = await connectNats(
      { natsUrl: `tls://127.0.0.1:${first.port},tls://localhost:${second.port}`, natsTlsCaFile: certs.caFile },
      'test-tls-failover',
    );
    try {
      await nc.flush();
      const servers = [first, second];
      const connected = servers.find((s) => nc.getServer().endsWith(`:${s.port}`))!;
      const other = servers.find((s) => s !== connected)!;
      const reconnected = (async () => {
        for await (const status of nc.status()) if (status.type === 'reconnect') return status.server;
        return undefined;
      })();
      await connected.stop();
      expect(await reconnected).toMatch(new RegExp(`:${other.port}$`));
      await nc.flush();
    } finally {
      await nc.close();
    }
  }, 30_000);
});
