import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { WorkerComponent } from './component.js';

export interface HealthStatus {
  healthy: boolean;
  ready: boolean;
  detail: Record<string, unknown>;
}

/** /healthz (alive and making progress), /readyz (stream and consumer exist, boot reconcile started), /metrics. */
async function startHealthServer(port: number, registry: Registry, status: () => HealthStatus): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      registry
        .metrics()
        .then((text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        })
        .catch((err: Error) => {
          res.writeHead(500).end(err.message);
        });
      return;
    }
    if (path === '/healthz' || path === '/readyz') {
      const s = status();
      const ok = path === '/healthz' ? s.healthy : s.ready;
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: ok ? 'ok' : 'unavailable', ...s.detail }));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /healthz, /readyz or /metrics\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The health server as a worker component; `port` is the bound one (a free one for port 0) once started. */
export function healthServerComponent(port: number, registry: Registry, status: () => HealthStatus): WorkerComponent & { readonly port: number } {
  let server: Awaited<ReturnType<typeof startHealthServer>> | undefined;
  return {
    name: 'health-server',
    get port() {
      return server?.port ?? port;
    },
    async start() {
      server = await startHealthServer(port, registry, status);
    },
    stop: async () => server?.close(),
  };
}
