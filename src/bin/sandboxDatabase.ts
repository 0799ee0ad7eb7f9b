import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseUrlError, type Database } from '../repository/database.js';
import { DEFAULT_DATABASE_URL } from '../settingValues.js';
import { createSandboxSchema, dropSandboxSchema, SANDBOX_SCHEMA_PREFIX } from '../repository/sandbox/sandboxSchemas.js';
import { redactCredentials } from '../redaction.js';
import { openDatabase, type DatabaseConfig } from './connectDatabase.js';

/**
 * The database a sandbox (or the demo) runs on, which it creates and removes again, so nothing
 * that existed before is ever read or written:
 *
 * - `DATABASE_URL` unset (or the worker's default file): a fresh SQLite file in a new temporary
 *   directory, removed with the directory;
 * - `sqlite:<path>`: that file, which must not exist yet; removed with its WAL files;
 * - `sqlite::memory:`: private to this process, nothing to remove;
 * - PostgreSQL: a new schema `pp_sandbox_<hex>` in that database, dropped with everything in it.
 */
export interface SandboxDatabase {
  readonly db: Database;
  /** How another process reaches the same data (credentials masked): for `verify`, `doctor`, psql. */
  readonly url: string;
  /** For people: the file, or the server and schema. */
  readonly where: string;
  /** The PostgreSQL schema, when there is one. */
  readonly schema?: string;
  /** The SQLite file, when there is one. */
  readonly file?: string;
  /** Closes the pool, then deletes the file or drops the schema. Idempotent. */
  remove(): Promise<void>;
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= fn());
}

/** `url` with `-c search_path=<schema>` added to its libpq `options`, as the worker's URL parsing honours. */
export function withSearchPath(url: string, schema: string): string {
  const queryStart = url.indexOf('?');
  const base = queryStart === -1 ? url : url.slice(0, queryStart);
  const params = new URLSearchParams(queryStart === -1 ? '' : url.slice(queryStart + 1));
  // A later -c wins over an earlier one for the same setting.
  params.set('options', [params.get('options'), `-c search_path=${schema}`].filter(Boolean).join(' '));
  return `${base}?${params.toString().replaceAll('+', '%20')}`;
}

async function openSqlite(config: DatabaseConfig, url: string): Promise<SandboxDatabase> {
  const temporary = url === DEFAULT_DATABASE_URL;
  const dir = temporary ? fs.mkdtempSync(path.join(os.tmpdir(), 'pending-projector-sandbox-')) : undefined;
  const file = dir ? path.join(dir, 'sandbox.db') : path.resolve(url.slice('sqlite:'.length));
  if (!dir && fs.existsSync(file)) {
    throw new DatabaseUrlError(
      `DATABASE_URL names ${file}, which exists: the sandbox seeds a database it creates itself; name a new file, or leave DATABASE_URL unset for a temporary one`,
    );
  }
  const createdDir = !dir && !fs.existsSync(path.dirname(file)) ? path.dirname(file) : undefined;
  const db = openDatabase({ ...config, databaseUrl: `sqlite:${file}` });
  return {
    db,
    url: `sqlite:${file}`,
    where: `SQLite file ${file}${dir ? ' (temporary)' : ''}`,
    file,
    remove: once(async () => {
      await db.destroy();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      else {
        for (const suffix of ['', '-wal', '-shm', '-journal']) fs.rmSync(`${file}${suffix}`, { force: true });
        // The directory it had to create goes too, unless something else was put there meanwhile.
        if (createdDir && fs.readdirSync(createdDir).length === 0) fs.rmdirSync(createdDir);
      }
    }),
  };
}

async function openPostgres(config: DatabaseConfig, url: string): Promise<SandboxDatabase> {
  const schema = `${SANDBOX_SCHEMA_PREFIX}${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const withAdmin = async (fn: (admin: Database) => Promise<void>) => {
    const admin = openDatabase({ ...config, dbMaxConnections: 2 });
    try {
      await fn(admin);
    } finally {
      await admin.destroy();
    }
  };
  await withAdmin((admin) => createSandboxSchema(admin, schema));
  const schemaUrl = withSearchPath(url, schema);
  const db = openDatabase({ ...config, databaseUrl: schemaUrl });
  return {
    db,
    url: redactCredentials(schemaUrl),
    where: `PostgreSQL ${redactCredentials(url)}, schema ${schema} (created for this sandbox)`,
    schema,
    remove: once(async () => {
      await db.destroy();
      await withAdmin((admin) => dropSandboxSchema(admin, schema));
    }),
  };
}

export function openSandboxDatabase(config: DatabaseConfig): Promise<SandboxDatabase> {
  const url = config.databaseUrl;
  if (url === 'sqlite::memory:') {
    const db = openDatabase(config);
    return Promise.resolve({ db, url, where: 'SQLite in memory (this process only)', remove: once(() => db.destroy()) });
  }
  if (url.startsWith('sqlite:')) return openSqlite(config, url);
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return openPostgres(config, url);
  return Promise.reject(
    new DatabaseUrlError(
      `unsupported DATABASE_URL ${JSON.stringify(redactCredentials(url))}: use sqlite:<path>, sqlite::memory: or postgres://user@host:port/db`,
    ),
  );
}
