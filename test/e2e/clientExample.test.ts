import fs from 'node:fs';
import path from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { silentLogger } from '../../src/logger.js';
import { listUnresolvedClarificationBundles } from '../../src/repository/clarifications/clarifications.js';
import { seedSandboxWorkspace, type SandboxWorkspace } from '../../src/repository/sandbox/seedSandboxWorkspace.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, natsUrl, uniquePrefix } from '../support/nats.js';
import { childEnv, ROOT, spawnLong } from '../support/sandboxProcess.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const EXAMPLE = path.join(ROOT, 'examples/client.ts');

it("README's library example is examples/client.ts, character for character", () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const link = readme.indexOf('[examples/client.ts](examples/client.ts)');
  expect(link).toBeGreaterThan(-1);
  const block = readme.slice(link).match(/```ts\n([\s\S]*?)```/);
  expect(block?.[1]).toBe(fs.readFileSync(EXAMPLE, 'utf8'));
});

describe('examples/client.ts against a worker with the sandbox workspace', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let workspace: SandboxWorkspace;
  const prefix = uniquePrefix('example');

  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
    workspace = await seedSandboxWorkspace(t.ctx);
    nc = await connectTestNats();
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  // Run as a user runs it: tsx resolves `pending-projector` through tsconfig.json's paths, to the
  // sources the package's dist/ is built from.
  const runExample = () => spawnLong(['--import', 'tsx', EXAMPLE], childEnv({ NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix }));

  it('answers the pending question it lists, then exits 0 (its connection closed)', async () => {
    const run = runExample();
    expect(await run.exited, run.output()).toBe(0);
    expect(run.stdout()).toContain(`answered ${workspace.question.pendingId} (delivery: resume)`);
    expect(run.stdout()).toContain(`session ${workspace.question.sessionId}: blocked=false`);
    expect((await listUnresolvedClarificationBundles(t.ctx, { workspaceId: workspace.workspaceId, limit: 10 })).bundles).toEqual([]);

    const again = runExample();
    expect(await again.exited, again.output()).toBe(0);
    expect(again.stdout()).toContain('no question is waiting for an answer');
  }, 60_000);
});
