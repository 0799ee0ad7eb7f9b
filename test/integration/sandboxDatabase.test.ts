import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSandboxDatabase } from '../../src/bin/sandboxDatabase.js';
import { DEFAULT_DATABASE_URL } from '../../src/settingValues.js';
import { migrateSchema } from '../../src/repository/migrate.js';

const config = (databaseUrl: string) => ({ databaseUrl, dbMaxConnections: 2 });

describe("the sandbox's SQLite database", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-sandbox-db-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is a new file in a new temporary directory when DATABASE_URL is the default, and goes with it', async () => {
    const sandbox = await openSandboxDatabase(config(DEFAULT_DATABASE_URL));
    await migrateSchema(sandbox.db, 'owned');
    expect(sandbox.file).not.toBe(path.resolve('data/pending-projector.db'));
    expect(fs.existsSync(sandbox.file!)).toBe(true);
    await sandbox.remove();
    expect(fs.existsSync(path.dirname(sandbox.file!))).toBe(false);
  });

  it('removes a named file with its WAL files, and the directory it had to create', async () => {
    const file = path.join(dir, 'new', 'sandbox.db');
    const sandbox = await openSandboxDatabase(config(`sqlite:${file}`));
    await migrateSchema(sandbox.db, 'owned');
    expect(fs.existsSync(file)).toBe(true);
    await sandbox.remove();
    await sandbox.remove();
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('keeps a directory that existed, and what else is in it', async () => {
    fs.writeFileSync(path.join(dir, 'keep.txt'), 'mine');
    const sandbox = await openSandboxDatabase(config(`sqlite:${path.join(dir, 'sandbox.db')}`));
    await migrateSchema(sandbox.db, 'owned');
    await sandbox.remove();
    expect(fs.readdirSync(dir)).toEqual(['keep.txt']);
  });
});
