import type { Database } from '../database.js';

/**
 * The PostgreSQL schema a sandbox lives in: created empty next to whatever the database already
 * holds, and dropped with everything in it when the sandbox ends, so existing data is never read
 * or written. Only names the sandbox generated reach these statements.
 */

/** Schema names the sandbox creates: a fixed start, so a leftover says who made it. */
export const SANDBOX_SCHEMA_PREFIX = 'pp_sandbox_';

export async function createSandboxSchema(db: Database, schema: string): Promise<void> {
  await db.knex.raw('CREATE SCHEMA ??', [schema]);
}

export async function dropSandboxSchema(db: Database, schema: string): Promise<void> {
  await db.knex.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
}

export async function schemaExists(db: Database, schema: string): Promise<boolean> {
  const result = await db.knex.raw<{ rows: unknown[] }>('SELECT 1 FROM information_schema.schemata WHERE schema_name = ?', [schema]);
  return result.rows.length > 0;
}
