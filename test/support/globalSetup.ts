import type { TestProject } from 'vitest/node';
import { NATS_URL, POSTGRES_URL, REQUIRE_INTEGRATION, canConnect, isTruthyFlag } from './services.js';

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
 * Finds PostgreSQL and NATS. Under a truthy CI or REQUIRE_INTEGRATION a missing service fails the whole
 * run. Locally, testcontainers is tried as a lazily imported fallback, and only then does the run go
 * on without the service, with a warning saying so: PostgreSQL's tests then show as skipped in the
 * counts (see describeEachDialect), and tests that need NATS fail.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const containers: StartedContainer[] = [];
  let postgresUrl: string | null = (await canConnect(POSTGRES_URL, 5432)) ? POSTGRES_URL : null;
  let natsUrl: string | null = (await canConnect(NATS_URL, 4222)) ? NATS_URL : null;
  const missing = [!postgresUrl && `PostgreSQL at ${POSTGRES_URL}`, !natsUrl && `NATS at ${NATS_URL}`].filter(Boolean);
  if (missing.length > 0 && REQUIRE_INTEGRATION) {
    const flags = (['CI', 'REQUIRE_INTEGRATION'] as const).filter((name) => isTruthyFlag(process.env[name])).map((name) => `${name}=${process.env[name]}`);
    throw new Error(`integration services unreachable, and required by ${flags.join(' and ')}: ${missing.join(', ')}`);
  }
  if (missing.length > 0) {
    try {
      const tc = await import('testcontainers');
      if (!postgresUrl) {
        const c = await new tc.GenericContainer('postgres:15')
          .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' })
          .withExposedPorts(5432)
          .start();
        containers.push(c);
        postgresUrl = `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/test`;
      }
      if (!natsUrl) {
        const c = await new tc.GenericContainer('nats:2.9').withCommand(['-js']).withExposedPorts(4222).start();
        containers.push(c);
        natsUrl = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
      }
    } catch (err) {
      const outcome = [!postgresUrl && "PostgreSQL's tests are skipped", !natsUrl && 'tests that need NATS fail'].filter(Boolean);
      console.warn(`[tests] ${missing.join(', ')} unreachable and no container fallback (${(err as Error).message}); ${outcome.join(', ')}`);
    }
  }
  project.provide('postgresUrl', postgresUrl);
  project.provide('natsUrl', natsUrl);
  return async () => {
    await Promise.all(containers.map((c) => c.stop()));
  };
}
