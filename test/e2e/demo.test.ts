import fs from 'node:fs';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect, inject, it } from 'vitest';
import { topologyFor, topologyStreams } from '../../src/contract/subjects.js';
import { createDatabase } from '../../src/repository/database.js';
import { schemaExists } from '../../src/repository/sandbox/sandboxSchemas.js';
import { describeEachDialect } from '../support/databases.js';
import { connectTestNats, natsUrl } from '../support/nats.js';
import { childEnv, spawnLong } from '../support/sandboxProcess.js';

describeEachDialect('npm run demo on %s', (dialect) => {
  it('replays the incident to the end, exits 0, and removes its database and streams', async () => {
    const env = childEnv({ NATS_URL: natsUrl(), DATABASE_URL: dialect === 'postgres' ? inject('postgresUrl')! : undefined });
    const demo = spawnLong(['--import', 'tsx', 'scripts/demo.ts'], env);
    const code = await demo.exited;
    const out = demo.stdout();
    expect(code, demo.output()).toBe(0);
    // The question stays visible after the lifecycle turn, then the answer clears it.
    expect(out).toMatch(/agent resumes: boot message written on lifecycle turn[\s\S]*pending_action=clarification[\s\S]*question answered/);
    expect(out).toContain('demo done');

    const prefix = out.match(/prefix "(demo_[^"]+)"/)![1]!;
    const nc = await connectTestNats();
    try {
      const jsm = await jetstreamManager(nc);
      for (const stream of topologyStreams(topologyFor(prefix))) await expect(jsm.streams.info(stream)).rejects.toThrow();
    } finally {
      await nc.drain();
    }
    if (dialect === 'sqlite') {
      const file = out.match(/SQLite file (\S+)/)![1]!;
      expect(fs.existsSync(file)).toBe(false);
    } else {
      const schema = out.match(/schema (pp_sandbox_\w+)/)![1]!;
      const db = createDatabase(inject('postgresUrl')!);
      try {
        expect(await schemaExists(db, schema)).toBe(false);
      } finally {
        await db.destroy();
      }
    }
  }, 120_000);
});
