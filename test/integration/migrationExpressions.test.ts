import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pendingIdOf } from '../../src/repository/clarifications/clarificationSql.js';
import { rawRows, beginOrJoin, type RepositoryContext } from '../../src/repository/context.js';
import { currentTurnAuthority, currentTurnIdSubquery } from '../../src/repository/turns/currentTurnAuthority.js';
import { postgresDialect, type DialectName } from '../../src/repository/dialect.js';
import { describeEachDialect, isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';

/**
 * Migration 0001 writes its expression indexes and PostgreSQL JSON helpers out in full instead of
 * importing them from the repository (see its header: a migration, once applied, must not change
 * what it creates). Two pins keep that copy honest:
 * - what 0001 created, read back from the database, is recorded here, so an edit of 0001 fails;
 * - the queries' own fragments still match it: each planner serves them from those indexes, and
 *   every helper the PostgreSQL fragments call is one 0001 created.
 * A query change that breaks the second pin needs a new migration, never an edit of 0001.
 * Migration 0003 renamed both indexes to their `pp_` names, each definition kept as 0001 wrote it.
 */

// As each database stores them: SQLite keeps the statement's text; PostgreSQL's own rendering,
// with its whitespace collapsed and the test schema's name removed.
const INDEX_DEFINITIONS: Record<DialectName, Record<string, string>> = {
  sqlite: {
    pp_turns_current_turn_order:
      'CREATE INDEX pp_turns_current_turn_order ON task_session_turns (task_session_id, ' +
      '(CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END), started_at DESC, created_at DESC, id DESC)',
    pp_messages_pending_id:
      'CREATE INDEX pp_messages_pending_id ON task_session_messages ((CASE WHEN ' +
      "json_type((CASE WHEN json_valid(metadata) THEN metadata END), '$.pending_id') = 'text' THEN " +
      "json_extract((CASE WHEN json_valid(metadata) THEN metadata END), '$.pending_id') END))",
  },
  postgres: {
    pp_turns_current_turn_order:
      'CREATE INDEX pp_turns_current_turn_order ON task_session_turns USING btree (task_session_id, ' +
      '( CASE WHEN (completed_at IS NULL) THEN 0 ELSE 1 END), started_at DESC, created_at DESC, id COLLATE "C" DESC)',
    pp_messages_pending_id: "CREATE INDEX pp_messages_pending_id ON task_session_messages USING btree (pp_json_string(metadata, '{pending_id}'::text[]))",
  },
};

// The PostgreSQL helpers 0001 creates: signature, attributes, and a digest of the body (prosrc is
// stored as written, so it reads the same on every PostgreSQL version).
const POSTGRES_HELPERS = [
  { name: 'pp_json_flag', args: 'doc text, key text', result: 'boolean', language: 'sql', body: '070ac730530903799ca7e9c6d2f3d829' },
  { name: 'pp_json_flag_parsed', args: 'doc text, key text', result: 'boolean', language: 'plpgsql', body: '94a669502b9ebb4d9c80f27e39ee5730' },
  { name: 'pp_json_string', args: 'doc text, path text[]', result: 'text', language: 'plpgsql', body: 'c6ad7e5ff078206d4c810f80d4af1ed4' },
  { name: 'pp_json_string_or_absent', args: 'doc text, key text', result: 'text', language: 'plpgsql', body: '835bfac89772e8d12b632e05731a0d07' },
  { name: 'pp_safe_jsonb', args: 'doc text', result: 'jsonb', language: 'plpgsql', body: '89a99ad953f552d1b845076cc64d5faa' },
].map((helper) => ({ ...helper, volatility: 'i', parallel: 's' }));

const SORT = /\bSort\b|TEMP B-TREE/;

async function indexDefinitions(t: TestDatabase): Promise<Record<string, string>> {
  const names = Object.keys(INDEX_DEFINITIONS[t.name]);
  const rows =
    t.name === 'sqlite'
      ? await rawRows<{ name: string; sql: string }>(t.ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name IN (?, ?)`, names)
      : await rawRows<{ name: string; sql: string }>(
          t.ctx,
          `SELECT indexname AS name, replace(indexdef, current_schema() || '.', '') AS sql
             FROM pg_indexes WHERE schemaname = current_schema() AND indexname IN (?, ?)`,
          names,
        );
  return Object.fromEntries(rows.map((row) => [row.name, t.name === 'sqlite' ? row.sql : row.sql.replace(/\s+/g, ' ')]));
}

/**
 * The plan each planner picks for `sql`. PostgreSQL is told to avoid sequential scans and sorts
 * wherever it can: on these near-empty tables it would otherwise scan and sort by cost alone, and
 * the plan would not say whether an index could serve the statement. SQLite, without statistics,
 * takes a matching index by itself.
 */
function plan(ctx: RepositoryContext, sql: string): Promise<string> {
  return beginOrJoin(ctx, async (tx) => {
    if (tx.dialect.name === 'sqlite') {
      return (await rawRows<{ detail: string }>(tx, `EXPLAIN QUERY PLAN ${sql}`)).map((row) => row.detail).join('\n');
    }
    for (const setting of ['enable_seqscan', 'enable_bitmapscan', 'enable_sort', 'enable_incremental_sort']) {
      await tx.knex.raw(`SET LOCAL ${setting} = off`);
    }
    return (await rawRows<{ 'QUERY PLAN': string }>(tx, `EXPLAIN ${sql}`)).map((row) => row['QUERY PLAN']).join('\n');
  });
}

describeEachDialect('migration 0001 and the queries on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  it('creates the expression indexes it has always created (0001 is frozen: change them in a new migration)', async () => {
    expect(await indexDefinitions(t)).toEqual(INDEX_DEFINITIONS[dialect]);
  });

  it('serves the pending-id lookup the clarification queries write from pp_messages_pending_id', async () => {
    const lookup = (expression: string) => plan(t.ctx, `SELECT m.id FROM task_session_messages m WHERE ${expression} = 'probe'`);
    expect(await lookup(pendingIdOf(t.ctx.dialect, 'm'))).toMatch(/\bpp_messages_pending_id\b/);
    // The same lookup of another key finds no index: the plan tells a matching expression apart.
    expect(await lookup(t.ctx.dialect.jsonString('m.metadata', 'question_id'))).not.toMatch(/\bpp_messages_pending_id\b/);
  });

  it("serves the current-turn rule's order from pp_turns_current_turn_order, with no sort", async () => {
    const { orderBy } = currentTurnAuthority(t.ctx.dialect, 't');
    const firstTurn = (order: string) => plan(t.ctx, `SELECT t.id FROM task_session_turns t WHERE t.task_session_id = 'probe' ORDER BY ${order} LIMIT 1`);
    const served = await firstTurn(orderBy);
    expect(served).toMatch(/\bpp_turns_current_turn_order\b/);
    expect(served).not.toMatch(SORT);
    // With the id key's direction flipped the index no longer gives the order, and the plan says so.
    expect(orderBy).toMatch(/ DESC$/);
    expect(await firstTurn(orderBy.replace(/ DESC$/, ' ASC'))).toMatch(SORT);
  });

  it('resolves a current turn through the scalar subquery from pp_turns_current_turn_order, with no sort', async () => {
    const resolved = await plan(t.ctx, `SELECT ${currentTurnIdSubquery(t.ctx.dialect, "'probe'")} AS turn_id`);
    expect(resolved).toMatch(/\bpp_turns_current_turn_order\b/);
    expect(resolved).not.toMatch(SORT);
  });
});

describe.skipIf(!isAvailable('postgres'))('the PostgreSQL JSON helpers of migration 0001', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('postgres');
  });
  afterAll(async () => {
    await t.close();
  });

  async function helpers() {
    const rows = await rawRows<{ name: string; args: string; result: string; language: string; volatility: string; parallel: string; body: string }>(
      t.ctx,
      `SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result,
              l.lanname AS language, p.provolatile AS volatility, p.proparallel AS parallel, p.prosrc AS body
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
        WHERE n.nspname = current_schema()
        ORDER BY p.proname`,
    );
    return rows.map((row) => ({ ...row, body: createHash('md5').update(row.body).digest('hex') }));
  }

  it('creates the helpers it has always created (0001 is frozen: change them in a new migration)', async () => {
    expect(await helpers()).toEqual(POSTGRES_HELPERS);
  });

  it('created every helper the PostgreSQL fragments call, IMMUTABLE so an index may use it', async () => {
    const fragments = [
      postgresDialect.jsonFlag('doc', 'k'),
      postgresDialect.jsonString('doc', 'a', 'k'),
      postgresDialect.jsonStringOrAbsent('doc', 'k'),
      postgresDialect.jsonPatch('doc', { k: 1 }, ['j']).sql,
    ];
    const called = [...new Set(fragments.flatMap((sql) => [...sql.matchAll(/\b(pp_[a-z_]+)\(/g)].map((match) => match[1]!)))].sort();
    expect(called).toEqual(['pp_json_flag', 'pp_json_string', 'pp_json_string_or_absent', 'pp_safe_jsonb']);
    const created = new Map((await helpers()).map((helper) => [helper.name, helper]));
    for (const name of called) expect({ name, volatility: created.get(name)?.volatility }).toEqual({ name, volatility: 'i' });
  });
});
