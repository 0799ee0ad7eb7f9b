import net from 'node:net';

/** Where the integration services are; the env names CI and developers set. */
export const POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const NATS_URL = process.env.TEST_NATS_URL ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

// How CI providers and people spell "off"; any other non-empty value (true, 1, yes, a provider's
// own token) means on, so a CI that sets CI=1 still fails on a missing service instead of skipping.
const OFF = new Set(['', '0', 'false', 'no', 'off']);

/** Whether an environment flag is set to anything but an "off" spelling (case and spaces ignored). */
export function isTruthyFlag(value: string | undefined): boolean {
  return value !== undefined && !OFF.has(value.trim().toLowerCase());
}

/** A truthy CI or REQUIRE_INTEGRATION turns a missing service into a failed run instead of a skip. */
export function integrationRequired(env: NodeJS.ProcessEnv): boolean {
  return isTruthyFlag(env.CI) || isTruthyFlag(env.REQUIRE_INTEGRATION);
}

export const REQUIRE_INTEGRATION = integrationRequired(process.env);

function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname || '127.0.0.1', port: parsed.port ? Number(parsed.port) : defaultPort };
}

export function canConnect(url: string, defaultPort: number, timeoutMs = 2000): Promise<boolean> {
  const { host, port } = hostPort(url, defaultPort);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
