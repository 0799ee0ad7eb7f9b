import type { TestProject } from 'vitest/node';
import { NATS_URL, POSTGRES_URL, REQUIRE_INTEGRATION, canConnect } from './services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string | null;
    natsUrl: string | null;
  }
}

interface StartedContainer {
  stop(): Promise<unknown>;
}

/**
 * Finds PostgreSQL and NATS. In CI (or with REQUIRE_INTEGRATION=1) a missing service fails the whole
 * run. Locally, testcontainers is tried as a lazily imported fallback, and only then are the suites
 * that need the service skipped, with a warning saying so.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const containers: StartedContainer[] = [];
  let postgresUrl: string | null = (await canConnect(POSTGRES_URL, 5432)) ? POSTGRES_URL : null;
  let natsUrl: string | null = (await canConnect(NATS_URL, 4222)) ? NATS_URL : null;
  const missing = [!postgresUrl && `PostgreSQL at ${POSTGRES_URL}`, !natsUrl && `NATS at ${NATS_URL}`].filter(Boolean);
  if (missing.length > 0 && REQUIRE_INTEGRATION) {
    throw new Error(`integration services unreachable (CI=true / REQUIRE_INTEGRATION=1): ${missing.join(', ')}`);
  }
  if (missing.length > 0) {
    try {
      const tc = await import('testcontainers');
      if (!postgresUrl) {
        const c = await new tc.GenericContainer('postgres:15').withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' }).withExposedPorts(5432).start();
        containers.push(c);
        postgresUrl = `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/test`;
      }
      if (!natsUrl) {
        const c = await new tc.GenericContainer('nats:2.9').withCommand(['-js']).withExposedPorts(4222).start();
        containers.push(c);
        natsUrl = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
      }
    } catch (err) {
      console.warn(`[tests] ${missing.join(', ')} unreachable and no container fallback (${(err as Error).message}); those suites are skipped`);
    }
  }
  project.provide('postgresUrl', postgresUrl);
  project.provide('natsUrl', natsUrl);
  return async () => {
    await Promise.all(containers.map((c) => c.stop()));
  };
}
