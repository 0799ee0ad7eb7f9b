import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { topologyFor } from '../contract/subjects.js';
import type { ConsoleAssets } from './consoleBundle.js';
import type { ConsoleSettings } from './commandSettings.js';

/** What the page reads from `/config.json` before it connects (docs/console.md). */
interface ConsolePageConfig {
  natsUrl: string;
  subjectPrefix: string;
  bucket: string;
}

function consolePageConfig(config: ConsoleSettings): ConsolePageConfig {
  return { natsUrl: config.consoleNatsUrl, subjectPrefix: config.subjectPrefix, bucket: topologyFor(config.subjectPrefix).summaryBucket };
}

export interface ConsoleServer {
  url: string;
  close(): Promise<void>;
}

/** Serves the page, its bundle, its stylesheet and its configuration; nothing else, and only GET/HEAD. */
export async function startConsoleServer(config: ConsoleSettings, assets: ConsoleAssets): Promise<ConsoleServer> {
  const routes: Record<string, { type: string; body: string }> = {
    '/': { type: 'text/html; charset=utf-8', body: assets.html },
    '/console.js': { type: 'text/javascript; charset=utf-8', body: assets.script },
    '/console.css': { type: 'text/css; charset=utf-8', body: assets.css },
    '/config.json': { type: 'application/json; charset=utf-8', body: JSON.stringify(consolePageConfig(config)) },
  };
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://console').pathname;
    const route = routes[path === '/index.html' ? '/' : path];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (!route) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    // The page holds NATS credentials in its session: no framing by other sites, no caching of the config.
    res.writeHead(200, {
      'content-type': route.type,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
    });
    res.end(req.method === 'HEAD' ? undefined : route.body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.consolePort, config.consoleHost, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.consoleHost.includes(':') ? `[${config.consoleHost}]` : config.consoleHost;
  return {
    url: `http://${host}:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
