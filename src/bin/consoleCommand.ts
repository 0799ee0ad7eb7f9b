import { buildConsoleAssets } from './consoleBundle.js';
import { startConsoleServer, type ConsoleServer } from './consoleServer.js';
import { SIGNAL_REPEAT_MS, watchShutdownSignals } from './shutdownSignals.js';
import type { ConsoleSettings } from './commandSettings.js';

/**
 * `pending-projector console`: bundles the page, serves it and prints its URL; the browser connects
 * to NATS itself (CONSOLE_NATS_URL), so this process holds no connection and no credentials.
 * Exits 0 on the first SIGINT or SIGTERM.
 */
export async function runConsoleCommand(config: ConsoleSettings): Promise<number> {
  const assets = await buildConsoleAssets();
  let server: ConsoleServer;
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
  await new Promise<void>((resolve) => watchShutdownSignals({ stop: () => resolve(), force: () => resolve() }));
  const stoppedAtMs = performance.now();
  await server.close();
  // Ctrl-C under npm arrives twice, a few milliseconds apart. The server closes at once, and a
  // signal that reaches the process while it tears down (tsx's loader thread) kills it with that
  // signal instead of the 0 asked for: stay until a repeat of the first signal can no longer come.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, SIGNAL_REPEAT_MS - (performance.now() - stoppedAtMs))));
  return 0;
}
