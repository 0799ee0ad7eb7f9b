import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createRepositoryContext } from '../../src/repository/context.js';
import { createDatabase } from '../../src/repository/database.js';
import { runCli, type CliOutcome } from '../support/cliProcess.js';
import { databaseContents, postgresObjects } from '../support/databaseContents.js';
import { describeEachDialect, isAvailable, openEmptyDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { fileTree } from '../support/fileTree.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

// The database comes from each test's flag, never from the environment the suite runs in.
const NO_DATABASE_ENV = { DATABASE_URL: undefined, SCHEMA_MODE: undefined };

const scratchDirs: string[] = [];
function scratchDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-readonly-'));
  scratchDirs.push(dir);
  return dir;
}

/** Runs `command` on `url` in `cwd` (where a relative default path would land). */
function run(command: 'verify' | 'doctor', url: string, cwd: string): Promise<CliOutcome> {
  return runCli([command, '--database-url', url], NO_DATABASE_ENV, { cwd });
}

/**
 * Every row and the structure of the database at `url`, read through a pool of its own that is
 * closed afterwards, so that no connection of the test is open while the commands run (SQLite then
 * has no `-wal`/`-shm` files: the commands' reads are the only ones).
 */
async function contentsAt(t: TestDatabase): Promise<unknown> {
  if (t.name === 'postgres') return { ...(await databaseContents(t)), server: await postgresObjects(t, [t.searchPath!, 'public']) };
  const db = createDatabase(t.url, { walCheckpointer: false });
  try {
    return await databaseContents({ ...t, db, ctx: createRepositoryContext(db) });
  } finally {
    await db.destroy();
  }
}

describeEachDialect('verify and doctor on %s', (dialect) => {
  const opened: TestDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
    for (const dir of scratchDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The database's directory (SQLite) and the commands' working directory, before and after, and the database's contents. */
  async function expectUnchangedBy(t: TestDatabase, commands: () => Promise<void>) {
    const cwd = scratchDir();
    const dirs = dialect === 'sqlite' ? [cwd, path.dirname(t.url.slice('sqlite:'.length))] : [cwd];
    if (dialect === 'sqlite') await t.db.destroy();
    const contents = await contentsAt(t);
    const trees = dirs.map(fileTree);
    await commands();
    expect(dirs.map(fileTree)).toEqual(trees);
    expect(await contentsAt(t)).toEqual(contents);
    return cwd;
  }

  it('write nothing on a migrated database with data: no file, no row, no object', async () => {
    const t = await openTestDatabase(dialect, undefined, { file: true });
    opened.push(t);
    const { sessionId } = await seedSession(t.ctx);
    const turnId = await seedTurnAt(t.ctx, sessionId, { startedAt: '2026-03-04T05:06:07.500000000Z' });
    await seedClarificationBundle(t.ctx, { sessionId, turnId });
    const outcomes: CliOutcome[] = [];
    await expectUnchangedBy(t, async () => {
      const cwd = scratchDir();
      outcomes.push(await run('verify', t.url, cwd), await run('doctor', t.url, cwd));
      expect(fileTree(cwd)).toEqual([]);
    });
    const [verify, doctor] = outcomes;
    // The seeded task has no summary yet: drift, which verify reports and does not repair.
    expect(verify!.status).toBe(1);
    expect(verify!.stdout).toMatch(/\tmissing\t/);
    expect(doctor!.status).toBe(0);
    expect(doctor!.stdout).toMatch(/\nverdict: the worker can run \(schema mode owned\)\n$/);
  });

  it('write nothing on an empty database, and verify says to migrate first', async () => {
    const t = await openEmptyDatabase(dialect, { file: true });
    opened.push(t);
    // A database with nothing in it, SQLite's a file of that name.
    if (dialect === 'sqlite') await t.db.knex.raw('SELECT 1');
    const outcomes: CliOutcome[] = [];
    await expectUnchangedBy(t, async () => {
      const cwd = scratchDir();
      outcomes.push(await run('verify', t.url, cwd), await run('doctor', t.url, cwd));
    });
    const [verify, doctor] = outcomes;
    expect(verify!.status).toBe(2);
    expect(verify!.stderr).toMatch(/lacks this service's migrations .*: run `pending-projector migrate` first/);
    expect(doctor!.status).toBe(0);
    expect(doctor!.stdout).toMatch(/schema mode: owned \(the database has none of Kandev's tables/);
  });
});

describe('verify and doctor on a SQLite file that does not exist', () => {
  afterEach(() => {
    for (const dir of scratchDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each(['absolute', 'relative'] as const)(
    'create neither the file nor its directory (%s path), say so once naming DATABASE_URL and exit 2',
    async (kind) => {
      const root = scratchDir();
      const file = path.join(root, 'data', 'pending-projector.db');
      const url = kind === 'absolute' ? `sqlite:${file}` : 'sqlite:./data/pending-projector.db';
      const verify = await run('verify', url, root);
      const doctor = await run('doctor', url, root);
      const doctorJson = await runCli(['doctor', '--json', '--database-url', url], NO_DATABASE_ENV, { cwd: root });
      expect(fileTree(root)).toEqual([]);

      const missing = `DATABASE_URL ${url}: no such file (${kind === 'relative' ? `${file}; ` : ''}verify and doctor never create a database`;
      expect(verify.status).toBe(2);
      expect(verify.stdout).toBe('');
      expect(verify.stderr.split('\n')).toEqual([expect.stringContaining(`pending-projector: ${missing}`), '']);

      expect(doctor.status).toBe(2);
      expect(doctor.stderr).toBe('');
      expect(doctor.stdout.split(missing)).toHaveLength(2);
      expect(doctor.stdout).toContain(`\ncannot run: ${missing}`);
      expect(doctor.stdout).toMatch(/\nverdict: the worker cannot run: .*\n$/);

      expect(doctorJson.status).toBe(2);
      const report = JSON.parse(doctorJson.stdout) as { reachable: boolean; problems: Array<{ check: string; message: string }>; verdict: { status: string } };
      expect(report).toMatchObject({ reachable: false, verdict: { status: 'cannot_run' } });
      expect(report.problems).toEqual([{ check: 'database', message: expect.stringContaining(missing) }]);
    },
  );
});

describe.skipIf(!isAvailable('postgres'))('doctor and migrate on a PostgreSQL URL whose search_path schema does not exist', () => {
  afterEach(() => {
    for (const dir of scratchDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('doctor cannot run (exit 2) and migrate refuses in one line (exit 2), both naming the schema and CREATE SCHEMA, creating nothing', async () => {
    // A database with this service's tables in public would hide nothing: the URL selects no schema at all.
    const t = await openEmptyDatabase('postgres');
    try {
      const schema = `nosuch_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
      const serverUrl = inject('postgresUrl')!;
      const url = `${serverUrl}${serverUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
      const cwd = scratchDir();
      const objects = await postgresObjects(t, [schema, 'public']);

      const doctor = await runCli(['doctor', '--database-url', url], NO_DATABASE_ENV, { cwd });
      expect(doctor.status).toBe(2);
      expect(doctor.stdout).toContain(`schema mode: not decided: the search_path (${schema}) selects no schema\n`);
      expect(doctor.stdout).toContain(`\ncannot run: the search_path of DATABASE_URL (${schema}) names no schema that exists in this database`);
      expect(doctor.stdout).toContain(`create it (CREATE SCHEMA ${schema};)`);
      expect(doctor.stdout).toMatch(new RegExp(`\\nverdict: the worker cannot run: the search_path of DATABASE_URL selects no schema \\(${schema}\\)\\n$`));
      const json = JSON.parse((await runCli(['doctor', '--json', '--database-url', url], NO_DATABASE_ENV, { cwd })).stdout) as Record<string, any>;
      expect(json.schema.search_path_schema_missing).toEqual({ search_path: schema, create_schema: `CREATE SCHEMA ${schema}` });
      expect(json.verdict).toMatchObject({ exit_code: 2, status: 'cannot_run' });

      const migrate = await runCli(['migrate', '--database-url', url], NO_DATABASE_ENV, { cwd });
      expect(migrate.status).toBe(2);
      expect(migrate.stdout).toBe('');
      expect(migrate.stderr).not.toContain('3F000');
      expect(migrate.stderr.split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^pending-projector: the search_path of DATABASE_URL \\(${schema}\\) .*CREATE SCHEMA ${schema};`)),
        '',
      ]);

      expect(await postgresObjects(t, [schema, 'public'])).toEqual(objects);
      expect(fileTree(cwd)).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
