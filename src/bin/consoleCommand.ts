import { buildConsoleAssets } from './consoleBundle.js';
import { startConsoleServer } from './consoleServer.js';
import type { ConsoleSettings } from './commandSettings.js';

/**
 * `pending-projector console`: bundles the page, serves it and prints its URL; the browser connects
 * to NATS itself (CONSOLE_NATS_URL), so this process holds no connection and no credentials.
 * Exits 0 on the first SIGINT or SIGTERM.
 */
export async function runConsoleCommand(config: ConsoleSettings): Promise<number> {
  const assets = await buildConsoleAssets();
  let server;
  try {
    server = await startConsoleServer(config, assets);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EADDRINUSE' && code !== 'EADDRNOTAVAIL' && code !== 'EACCES') throw err;
    process.stderr.write(
      `pending-projector: cannot listen on ${config.consoleHost}:${config.consolePort} (${code}); set CONSOLE_PORT / --console-port or CONSOLE_HOST / --console-host\n`,
    );
    return 2;
  }
  process.stdout.write(`console: ${server.url} (the page connects to ${config.consoleNatsUrl}; Ctrl-C to stop)\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await server.close();
  return 0;
}
