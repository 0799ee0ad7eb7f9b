import { checkServerIdentity, type PeerCertificate } from 'node:tls';

/**
 * What Node passes as `this` to a `checkServerIdentity` callback: the options of the `tls.connect`
 * call, where nats.js puts the TCP socket it dialled (`socket`), or the host it dials (`host`,
 * TLS-first servers), and the server's name when NATS_URL named it by one (`servername`).
 */
interface TlsConnectOptions {
  servername?: string;
  host?: string;
  socket?: { remoteAddress?: string };
}

/**
 * The certificate check of every NATS server, against the host NATS_URL gives for it, name or IP.
 *
 * nats.js passes a server's name as `servername` (SNI, and what Node checks against), but for a
 * server given by IP it passes none (an IP must not be sent as SNI), and Node then checks the
 * certificate against `localhost`: a certificate naming the IP was refused, and any certificate
 * naming `localhost` accepted for every IP. A server given by IP is reached at that IP, so the
 * address the socket is connected to is the host NATS_URL gave, checked as an IP SAN. With no
 * host to check against (Node no longer calling this on its connect options), the server is
 * refused: a connection that cannot be identified must not carry credentials.
 */
export function checkNatsServerIdentity(this: TlsConnectOptions | undefined, _hostname: string, cert: PeerCertificate): Error | undefined {
  const host = this?.servername || this?.host || this?.socket?.remoteAddress;
  if (!host) return new Error('cannot tell which NATS server this certificate is for, so it is refused');
  return checkServerIdentity(host, cert);
}
