import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { inject } from 'vitest';
import { topologyFor, topologyStreams } from '../../src/contract/subjects.js';
import { ENDPOINTS } from '../../src/contract/endpoints.js';
import { createDatabase } from '../../src/repository/database.js';
import { schemaExists } from '../../src/repository/sandbox/sandboxSchemas.js';
import { runCli } from '../support/cliProcess.js';
import { describeEachDialect } from '../support/databases.js';
import { connectTestNats, eventually, natsUrl } from '../support/nats.js';
import { childEnv, shellWords, spawnLong, type LongProcess } from '../support/sandboxProcess.js';

// Starting a worker, migrating and seeding, on a loaded 2-core host; each printed npx command is a
// process of its own (seconds each there).
const READY_MS = 90_000;

interface Summary {
  task_id: string;
  status_summary: { revision: number; pending_action?: string; queued_prompt_count?: number };
}

/** The printed command line of `form` for `endpoint`, as words. */
function printed(stdout: string, form: 'npx' | 'nats', endpoint: string): string[] {
  const start = form === 'npx' ? `npx pending-projector sandbox request ${endpoint} ` : 'nats req ';
  const line = stdout
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.startsWith(start) && (form === 'npx' || shellWords(l)[2]!.endsWith(`.pending_projector.v1.${endpoint}`)));
  if (!line) throw new Error(`the sandbox printed no ${form} command for ${endpoint}:\n${stdout}`);
  return shellWords(line);
}

/** Runs a printed `npx pending-projector ...` command as the CLI process it names. */
async function runPrinted(words: string[]): Promise<{ status: number | null; reply: Record<string, unknown> }> {
  expect(words.slice(0, 2)).toEqual(['npx', 'pending-projector']);
  const outcome = await runCli(words.slice(2), { NATS_URL: natsUrl() });
  expect(outcome.stderr).toBe('');
  return { status: outcome.status, reply: JSON.parse(outcome.stdout) as Record<string, unknown> };
}

describeEachDialect('pending-projector sandbox on %s, end to end', (dialect) => {
  let sandbox: LongProcess;
  let nc: NatsConnection;
  let summaries: Summary[] = [];
  let sub: Subscription;
  let prefix: string;

  beforeAll(async () => {
    nc = await connectTestNats();
    const env = childEnv({ NATS_URL: natsUrl(), LOG_LEVEL: 'warn', DATABASE_URL: dialect === 'postgres' ? inject('postgresUrl')! : undefined });
    sandbox = spawnLong(['sandbox'], env, { cli: true });
    prefix = (await sandbox.waitFor(/^sandbox ready \(prefix (\S+)\)/m, READY_MS))[1]!;
    const watched = shellWords(
      sandbox
        .stdout()
        .split('\n')
        .find((l) => l.trim().startsWith('nats sub '))!
        .trim(),
    );
    expect(watched[2]).toBe(topologyFor(prefix).summarySubject);
    sub = nc.subscribe(watched[2]!);
    void (async () => {
      for await (const m of sub) summaries.push(m.json<{ data: Summary }>().data);
    })();
    await nc.flush();
  }, READY_MS + 10_000);

  afterAll(async () => {
    sub?.unsubscribe();
    if (sandbox?.child.exitCode === null) await sandbox.stop();
    await nc?.drain();
  });

  it('serves the printed requests: listing the question, answering it (its summary changes), and the queue', async () => {
    const stdout = sandbox.stdout();
    // The printed list: one pending question, the one the printed answer names.
    const listed = await runPrinted(printed(stdout, 'npx', 'clarification.list_pending'));
    expect(listed.status).toBe(0);
    const respondWords = printed(stdout, 'npx', 'clarification.respond');
    const pendingId = (JSON.parse(respondWords[5]!) as { pending_id: string }).pending_id;
    expect((listed.reply.bundles as Array<{ pending_id: string }>).map((b) => b.pending_id)).toEqual([pendingId]);

    // replica.stats, which every replica answers: the printed command gathers the sandbox's one worker.
    const replicas = await runPrinted(printed(stdout, 'npx', 'replica.stats'));
    expect(replicas.status).toBe(0);
    expect(replicas.reply.replicas).toEqual([expect.objectContaining({ replica: expect.any(String), events_by_outcome: expect.any(Object) })]);

    const before = await runPrinted(printed(stdout, 'npx', 'summary.get'));
    const stored = before.reply as unknown as Summary;
    expect(stored.status_summary.pending_action).toBe('clarification');

    // The printed way to watch, without the NATS CLI: it prints the change too.
    const watchLine = stdout
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.startsWith('npx pending-projector sandbox watch'))!;
    const watch = spawnLong(shellWords(watchLine).slice(2), childEnv({ NATS_URL: natsUrl() }), { cli: true });
    await eventually(() => (watch.output().includes('watching ') ? true : undefined), 30_000, 'sandbox watch to subscribe');

    summaries = [];
    const answered = await runPrinted(respondWords);
    expect(answered.status).toBe(0);
    expect(answered.reply).toMatchObject({ ok: true, claimed: true, status: 'answered', task_id: stored.task_id });
    const changed = await eventually(() => summaries.find((s) => s.task_id === stored.task_id), 20_000, 'the answered task summary');
    expect(changed.status_summary.revision).toBe(stored.status_summary.revision + 1);
    expect(changed.status_summary.pending_action).toBeUndefined();
    await watch.waitFor(new RegExp(`task ${stored.task_id}  revision ${stored.status_summary.revision + 1}  pending_action=\\(none\\)`), 20_000);
    expect(await watch.stop()).toBe(0);
    expect((await runPrinted(printed(stdout, 'npx', 'clarification.list_pending'))).reply.bundles).toEqual([]);

    // The nats CLI form: its subject and body, sent as `nats req` would.
    const [, , subject, body] = printed(stdout, 'nats', 'queue.list');
    const queue = (await nc.request(subject!, body!, { timeout: 10_000 })).json<{ ok: boolean; count: number; entries: unknown[] }>();
    expect(queue).toMatchObject({ ok: true, count: 2 });
    expect(queue.entries).toHaveLength(2);

    const enqueued = await runPrinted(printed(stdout, 'npx', 'queue.enqueue'));
    expect(enqueued.reply).toMatchObject({ ok: true, delivery_kind: 'queued' });
    const counted = await eventually(
      () => summaries.find((s) => s.task_id === enqueued.reply.task_id && s.status_summary.queued_prompt_count === 3),
      20_000,
      'queued_prompt_count 3',
    );
    expect(counted.status_summary.pending_action).toBeUndefined();
  }, 180_000);

  it('answers ok to every printed request, each sent in the printed order as `nats req` would send it', async () => {
    const lines = sandbox
      .stdout()
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.startsWith('nats req '));
    expect(lines.length).toBe(Object.keys(ENDPOINTS).length);
    const failed: string[] = [];
    for (const line of lines) {
      const [, , subject, body] = shellWords(line);
      const reply = (await nc.request(subject!, body!, { timeout: 65_000 })).json<{ ok: boolean }>();
      if (reply.ok !== true) failed.push(`${subject}: ${JSON.stringify(reply)}`);
    }
    expect(failed).toEqual([]);
  }, 120_000);

  it('exits 0 at SIGTERM, leaving neither its database nor its streams behind', async () => {
    const where = sandbox.stdout().match(/^ {2}database: (.*)$/m)![1]!;
    const file = where.match(/^SQLite file (\S+)/)?.[1];
    const schema = where.match(/schema (pp_sandbox_\w+)/)?.[1];
    if (dialect === 'sqlite') expect(file && fs.existsSync(file)).toBe(true);
    else expect(schema).toBeDefined();

    expect(await sandbox.stop()).toBe(0);

    if (file) {
      expect(fs.existsSync(file)).toBe(false);
      expect(fs.existsSync(path.dirname(file))).toBe(false);
    }
    if (schema) {
      const db = createDatabase(inject('postgresUrl')!);
      try {
        expect(await schemaExists(db, schema)).toBe(false);
      } finally {
        await db.destroy();
      }
    }
    const jsm = await jetstreamManager(nc);
    for (const stream of topologyStreams(topologyFor(prefix))) await expect(jsm.streams.info(stream)).rejects.toThrow();
  }, 60_000);
});

it('refuses a SQLite DATABASE_URL that exists, and leaves the file as it was', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-sandbox-refuse-'));
  try {
    const file = path.join(dir, 'mine.db');
    fs.writeFileSync(file, 'not to be touched');
    const outcome = await runCli(['sandbox'], { DATABASE_URL: `sqlite:${file}`, NATS_URL: natsUrl() });
    expect(outcome.status).toBe(2);
    expect(outcome.stderr).toContain(`${file}, which exists`);
    expect(fs.readFileSync(file, 'utf8')).toBe('not to be touched');
    expect(fs.readdirSync(dir)).toEqual(['mine.db']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
