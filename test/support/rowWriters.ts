import { randomUUID } from 'node:crypto';
import { storesOf } from '../../src/bin/assembly.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { createMessage, type CreateMessageInput } from '../../src/repository/messages.js';
import { createSession, setSessionState } from '../../src/repository/tasks/tasks.js';
import { completeTurn, startTurn } from '../../src/repository/turns/turns.js';
import { createMonotonicClock, storedTimestampForm, toCanonicalTimestamp, type Clock } from '../../src/timestamps.js';
import { clarificationMetadata } from '../../bench/seed/messages.js';
import { describeEachDialect, openKandevDatabase, openTestDatabase, type TestDatabase } from './databases.js';
import { seedClarificationBundle, seedSession, seedTurnAt, type SeedBundleOptions, type SeededSession, type SeedTurn, type TimestampText } from './seed.js';
import { seededRandom, textsFor, type TextPlan } from './timestampTexts.js';

/**
 * Who owns the schema a test runs on, and who writes its rows:
 * - `owned`: this service's migrations created the tables, and the rows are written through this
 *   service's repository (the suites as they always ran);
 * - `kandev`: Kandev's backend created them (test/support/kandevSchema.ts), and Kandev writes its
 *   rows: raw INSERTs and UPDATEs with the timestamp text Kandev's Go drivers store (SQLite:
 *   `2026-08-20 10:00:00.5+00:00`, trailing zeros trimmed; PostgreSQL: a naive `timestamp`), never
 *   through this service's formatting, so a read that mishandles Kandev's rows fails the test.
 */
export type SchemaKind = 'owned' | 'kandev';
export const SCHEMA_KINDS: readonly SchemaKind[] = ['owned', 'kandev'];

/**
 * describeEachDialect once per schema kind. The owned schema keeps the title as given (the suite's
 * existing names); the Kandev schema's title says so.
 */
export function describeEachSchemaAndDialect(title: string, body: (dialect: DialectName, schema: SchemaKind) => void): void {
  for (const schema of SCHEMA_KINDS) describeEachDialect(schema === 'owned' ? title : `${title}, beside Kandev's schema`, (dialect) => body(dialect, schema));
}

/** An empty database of the kind: migrated by this service (owned), or Kandev's tables and nothing of ours (kandev). */
export function openSchemaDatabase(dialect: DialectName, schema: SchemaKind, options: { file?: boolean } = {}): Promise<TestDatabase> {
  return schema === 'owned' ? openTestDatabase(dialect, undefined, options) : openKandevDatabase(dialect, options);
}

/**
 * The repository context a test reads (and this service writes) through, as the service builds it:
 * on Kandev's schema after migration, with the timestamp forms detected (`storesOf`), so reads and
 * this service's writes follow Kandev's rows. The owned schema's is `t.ctx`, as before.
 */
export async function serviceContext(t: TestDatabase, schema: SchemaKind): Promise<RepositoryContext> {
  return schema === 'owned' ? t.ctx : storesOf(t.db, { clock: t.ctx.clock });
}

/** What a test writes as the other side of the database (Kandev's backend, or this service's repository standing in for it). */
export interface RowWriter {
  readonly schema: SchemaKind;
  /** A task with one session (RUNNING and primary unless told), in its own workspace unless given one. */
  session(options?: { workspaceId?: string; state?: string; isPrimary?: boolean }): Promise<SeededSession>;
  /** Another session of an existing task. */
  addSession(input: { taskId: string; isPrimary?: boolean; state?: string }): Promise<{ id: string }>;
  /** An open conversational turn, started at `startedAt` or now, created now. */
  startTurn(sessionId: string, options?: { id?: string; startedAt?: string }): Promise<{ id: string }>;
  /** A turn row exactly as given (explicit instants, raw metadata), its timestamps in this writer's text. */
  turnAt(sessionId: string, turn: SeedTurn): Promise<string>;
  /** Completes an open turn, at `completedAt` or now. */
  completeTurn(turnId: string, completedAt?: string): Promise<void>;
  /** A message on its turn, else the open turn, else a new turn; `completedTurn`: on a fresh lifecycle turn. */
  message(input: CreateMessageInput): Promise<{ id: string; turnId: string }>;
  /** A clarification bundle: one row per question sharing `pending_id`, the last one requesting input. */
  bundle(options: SeedBundleOptions): Promise<{ pendingId: string; messages: Array<{ id: string }> }>;
  setSessionState(sessionId: string, state: string): Promise<void>;
  /** A summary row as its writer stores it (fields this service does not own, an earlier revision). */
  summary(row: { taskId: string; workspaceId: string; revision: number; summary: string; updatedAt: string }): Promise<void>;
}

/** The writer of `schema`: this service's repository on `ctx` (owned), or Kandev's raw rows (kandev, in `plan`'s text). */
export function rowWriter(schema: SchemaKind, ctx: RepositoryContext, plan: TextPlan = 'kandev', seed = 1): RowWriter {
  return schema === 'owned' ? repositoryWriter(ctx) : kandevWriter(ctx, plan, seed);
}

/** This service's repository functions, as the suites on the owned schema always seeded. */
export function repositoryWriter(ctx: RepositoryContext): RowWriter {
  return {
    schema: 'owned',
    session: (options) => seedSession(ctx, options),
    addSession: (input) => createSession(ctx, input),
    startTurn: (sessionId, options) => startTurn(ctx, sessionId, options),
    turnAt: (sessionId, turn) => seedTurnAt(ctx, sessionId, turn),
    completeTurn: async (turnId, completedAt) => {
      await completeTurn(ctx, turnId, completedAt);
    },
    message: (input) => createMessage(ctx, input),
    bundle: (options) => seedClarificationBundle(ctx, options),
    setSessionState: async (sessionId, state) => {
      await setSessionState(ctx, sessionId, state);
    },
    summary: async (row) => {
      await ctx
        .knex('task_status_summaries')
        .insert({ task_id: row.taskId, workspace_id: row.workspaceId, revision: row.revision, summary: row.summary, updated_at: row.updatedAt });
    },
  };
}

/**
 * The timestamp text Kandev's backend stores for a canonical instant. SQLite: Kandev's Go driver's
 * text (`plan` 'mixed': each value in that form or the canonical one at random, as a database both
 * have written holds). PostgreSQL: a naive `timestamp`, sent as its own text form (`2026-08-20
 * 10:00:00.5`; 'mixed': that or the RFC 3339 text, which the column reads as the same instant).
 */
export function kandevTexts(dialect: DialectName, plan: TextPlan, seed = 1): TimestampText {
  if (dialect === 'sqlite') return textsFor(plan, seed);
  const naive = (canonical: string) => `${canonical.slice(0, 10)} ${canonical.slice(11, 26)}`;
  if (plan === 'kandev') return naive;
  const random = seededRandom(seed);
  return (canonical) => (random() < 0.5 ? naive(canonical) : canonical);
}

/** Kandev's SQLite text of `canonical` (microseconds) plus this instant's nanosecond digits, trailing zeros trimmed. */
function withNanoseconds(canonical: string): string {
  const nanos = String(process.hrtime.bigint() % 1000n).padStart(3, '0');
  const fraction = `${canonical.slice(20, 26)}${nanos}`.replace(/0+$/, '');
  return `${canonical.slice(0, 10)} ${canonical.slice(11, 19)}${fraction === '' ? '' : `.${fraction}`}+00:00`;
}

/**
 * Kandev's writes, as raw statements on Kandev's column set: the columns its Go repository names,
 * its defaults for the rest (a message's `updated_at` is left to `DEFAULT CURRENT_TIMESTAMP`), each
 * timestamp in Kandev's text. "Now" is Kandev's own clock: wall time, never repeating, with
 * nanoseconds on SQLite, as Go's clock and driver write them.
 */
export function kandevWriter(ctx: RepositoryContext, plan: TextPlan = 'kandev', seed = 1, clock: Clock = createMonotonicClock()): RowWriter {
  const knex = ctx.knex;
  const text = kandevTexts(ctx.dialect.name, plan, seed);
  const at = (instant: string | undefined) => {
    if (instant) return text(toCanonicalTimestamp(instant), '');
    const now = clock();
    const stored = text(now, '');
    // Kandev's Go clock has nanoseconds, and its SQLite driver keeps them (PostgreSQL holds microseconds).
    return ctx.dialect.name === 'sqlite' && storedTimestampForm(stored) === 'kandev' ? withNanoseconds(now) : stored;
  };
  const taskOf = async (sessionId: string) => String((await knex('task_sessions').select('task_id').where({ id: sessionId }).first()).task_id);

  const insertTurn = async (sessionId: string, row: { id?: string; startedAt?: string; completed: boolean; metadata: Record<string, unknown> }) => {
    const id = row.id ?? randomUUID();
    const now = at(undefined);
    const startedAt = row.startedAt ? at(row.startedAt) : now;
    await knex('task_session_turns').insert({
      id,
      task_session_id: sessionId,
      task_id: await taskOf(sessionId),
      started_at: startedAt,
      completed_at: row.completed ? startedAt : null,
      metadata: JSON.stringify(row.metadata),
      created_at: now,
      updated_at: now,
    });
    return id;
  };

  const writer: RowWriter = {
    schema: 'kandev',
    async session(options = {}) {
      const workspaceId = options.workspaceId ?? `ws-${randomUUID()}`;
      const taskId = randomUUID();
      const sessionId = randomUUID();
      const now = at(undefined);
      await knex('tasks').insert({
        id: taskId,
        workspace_id: workspaceId,
        title: 'seeded task',
        state: 'TODO',
        metadata: '{}',
        created_at: now,
        updated_at: now,
      });
      await knex('task_sessions').insert({
        id: sessionId,
        task_id: taskId,
        state: options.state ?? 'RUNNING',
        metadata: '{}',
        is_primary: (options.isPrimary ?? true) ? 1 : 0,
        started_at: now,
        updated_at: now,
      });
      return { taskId, sessionId, workspaceId };
    },
    async addSession(input) {
      const id = randomUUID();
      const now = at(undefined);
      await knex('task_sessions').insert({
        id,
        task_id: input.taskId,
        state: input.state ?? 'RUNNING',
        metadata: '{}',
        is_primary: input.isPrimary ? 1 : 0,
        started_at: now,
        updated_at: now,
      });
      return { id };
    },
    async startTurn(sessionId, options = {}) {
      return { id: await insertTurn(sessionId, { ...options, completed: false, metadata: {} }) };
    },
    turnAt: (sessionId, turn) => seedTurnAt(ctx, sessionId, turn, text),
    async completeTurn(turnId, completedAt) {
      const now = at(undefined);
      await knex('task_session_turns')
        .where({ id: turnId })
        .whereNull('completed_at')
        .update({ completed_at: completedAt ? at(completedAt) : now, updated_at: now });
    },
    async message(input) {
      let turnId = input.turnId;
      if (turnId === undefined && input.completedTurn) {
        // Kandev's createCompletedTurn: born completed, marked in the same INSERT (spec AC-1).
        turnId = await insertTurn(input.sessionId, { completed: true, metadata: { lifecycle_only: true } });
      } else if (turnId === undefined) {
        // Kandev's getOrStartTurn, with its own plain-text ORDER BY over its own rows.
        const open = await knex('task_session_turns')
          .select('id')
          .where({ task_session_id: input.sessionId })
          .whereNull('completed_at')
          .orderBy([
            { column: 'started_at', order: 'desc' },
            { column: 'id', order: 'desc' },
          ])
          .first();
        turnId = open ? String(open.id) : await insertTurn(input.sessionId, { completed: false, metadata: {} });
      }
      const id = input.id ?? randomUUID();
      await knex('task_session_messages').insert({
        id,
        task_session_id: input.sessionId,
        task_id: await taskOf(input.sessionId),
        turn_id: turnId,
        author_type: input.authorType ?? 'agent',
        author_id: input.authorId ?? '',
        content: input.content ?? '',
        requests_input: input.requestsInput ? 1 : 0,
        type: input.type ?? 'message',
        metadata: JSON.stringify(input.metadata ?? {}),
        created_at: at(input.createdAt),
      });
      return { id, turnId };
    },
    async bundle(options) {
      const pendingId = options.pendingId ?? randomUUID();
      const statuses = options.statuses ?? ['pending'];
      const messages: Array<{ id: string }> = [];
      for (const [index, status] of statuses.entries()) {
        messages.push(
          await writer.message({
            sessionId: options.sessionId,
            turnId: options.turnId,
            type: 'clarification_request',
            authorType: 'agent',
            content: `Question ${index + 1}`,
            requestsInput: index === statuses.length - 1,
            metadata: clarificationMetadata({ pendingId, index, total: statuses.length, status, context: 'seeded', extra: options.metadata }),
            createdAt: options.createdAt,
          }),
        );
      }
      return { pendingId, messages };
    },
    async setSessionState(sessionId, state) {
      await knex('task_sessions')
        .where({ id: sessionId })
        .update({ state, updated_at: at(undefined) });
    },
    async summary(row) {
      await knex('task_status_summaries').insert({
        task_id: row.taskId,
        workspace_id: row.workspaceId,
        revision: row.revision,
        summary: row.summary,
        updated_at: at(row.updatedAt),
      });
    },
  };
  return writer;
}
