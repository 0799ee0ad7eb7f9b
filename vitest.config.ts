import { defineConfig } from 'vitest/config';

// Two cores on the project's machines: two forks keep SQLite, PostgreSQL and NATS suites
// in parallel without starving the services they talk to.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ['test/support/globalSetup.ts'],
    setupFiles: ['test/support/leakCheck.ts', 'test/support/kandevEventCheck.ts'],
  },
});
