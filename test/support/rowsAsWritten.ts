import { randomUUID } from 'node:crypto';
import type { TestDatabase } from './databases.js';

/**
 * Rows inserted exactly as given, bypassing the repository: the text other producers (Kandev's Go
 * driver, SQLite's CURRENT_TIMESTAMP default, a buggy writer) leave in a column, and metadata that
 * is not JSON. Timestamps default to Kandev's SQLite text form. Works on this service's schema and
 * on the Kandev-shaped fixture (only columns both have).
 */

export const KANDEV_TIME = '2026-03-04 05:06:07.5+00:00';

type Text = string | null;

export async function writeTask(t: TestDatabase, row: { id?: string; metadata?: Text; createdAt?: Text; updatedAt?: Text } = {}): Promise<string> {
  const id = row.id ?? randomUUID();
  await t.db.knex('tasks').insert({
    id,
    workspace_id: 'ws-doctor',
    title: 'written as given',
    metadata: row.metadata === undefined ? '{}' : row.metadata,
    created_at: row.createdAt ?? KANDEV_TIME,
    updated_at: row.updatedAt ?? KANDEV_TIME,
  });
  return id;
}

export async function writeSession(t: TestDatabase, taskId: string, row: { id?: string; metadata?: Text; startedAt?: string } = {}): Promise<string> {
  const id = row.id ?? randomUUID();
  await t.db.knex('task_sessions').insert({
    id,
    task_id: taskId,
    state: 'RUNNING',
    metadata: row.metadata === undefined ? '{}' : row.metadata,
    started_at: row.startedAt ?? KANDEV_TIME,
    updated_at: row.startedAt ?? KANDEV_TIME,
  });
  return id;
}

export interface WrittenTurn {
  id?: string;
  metadata?: Text;
  startedAt?: string;
  createdAt?: string;
  /** Null (the default) leaves the turn open. */
  completedAt?: Text;
}

export async function writeTurn(t: TestDatabase, sessionId: string, row: WrittenTurn = {}): Promise<string> {
  const id = row.id ?? randomUUID();
  const session = await t.db.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
  await t.db.knex('task_session_turns').insert({
    id,
    task_session_id: sessionId,
    task_id: session.task_id,
    started_at: row.startedAt ?? KANDEV_TIME,
    created_at: row.createdAt ?? row.startedAt ?? KANDEV_TIME,
    updated_at: row.createdAt ?? row.startedAt ?? KANDEV_TIME,
    completed_at: row.completedAt ?? null,
    metadata: row.metadata === undefined ? '{}' : row.metadata,
  });
  return id;
}

export async function writeMessage(t: TestDatabase, turnId: string, row: { id?: string; metadata?: Text; createdAt?: string } = {}): Promise<string> {
  const id = row.id ?? randomUUID();
  const turn = await t.db.knex('task_session_turns').select('task_session_id', 'task_id').where({ id: turnId }).first();
  await t.db.knex('task_session_messages').insert({
    id,
    task_session_id: turn.task_session_id,
    task_id: turn.task_id,
    turn_id: turnId,
    author_type: 'agent',
    content: 'written as given',
    type: 'message',
    metadata: row.metadata === undefined ? '{}' : row.metadata,
    created_at: row.createdAt ?? KANDEV_TIME,
    updated_at: row.createdAt ?? KANDEV_TIME,
  });
  return id;
}
