import { readStoredTimestamp } from '../timestamps.js';

/**
 * The one place snake_case rows become camelCase records. Metadata is parsed defensively: a NULL,
 * empty or malformed column becomes `{}` with `metadataValid: false`, matching the SQL rule that
 * such a document has no keys. Timestamps reach JavaScript in the canonical form whichever form the
 * row was written in (Kandev's SQLite text included), so records, replies and cursors never carry
 * the stored text.
 */

export interface TurnRecord {
  id: string;
  sessionId: string;
  taskId: string;
  startedAt: string;
  completedAt: string | null;
  createdAt: string;
  updatedAt: string;
  metadata: Record<string, unknown>;
  metadataValid: boolean;
}

export interface MessageRecord {
  id: string;
  sessionId: string;
  taskId: string;
  turnId: string;
  authorType: string;
  authorId: string;
  content: string;
  requestsInput: boolean;
  type: string;
  metadata: Record<string, unknown>;
  metadataValid: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface SessionRecord {
  id: string;
  taskId: string;
  state: string;
  isPrimary: boolean;
  startedAt: string;
  updatedAt: string;
}

export interface TaskRecord {
  id: string;
  workspaceId: string;
  title: string;
  state: string;
  archivedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export function parseMetadata(raw: unknown): { metadata: Record<string, unknown>; valid: boolean } {
  if (typeof raw !== 'string') return { metadata: {}, valid: false };
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return { metadata: parsed as Record<string, unknown>, valid: true };
    }
  } catch {
    // Malformed rows from other producers read as "no keys", never as an error.
  }
  return { metadata: {}, valid: false };
}

type Row = Record<string, unknown>;
/** A column's text, '' for SQL NULL: the one reading of a text column every row mapper shares. */
export const str = (v: unknown): string => (v === null || v === undefined ? '' : String(v));
const ts = (v: unknown): string => readStoredTimestamp(str(v));
const tsOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : readStoredTimestamp(String(v)));

export function toTurnRecord(row: Row): TurnRecord {
  const { metadata, valid } = parseMetadata(row.metadata);
  return {
    id: str(row.id),
    sessionId: str(row.task_session_id),
    taskId: str(row.task_id),
    startedAt: ts(row.started_at),
    completedAt: tsOrNull(row.completed_at),
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
    metadata,
    metadataValid: valid,
  };
}

export function toMessageRecord(row: Row): MessageRecord {
  const { metadata, valid } = parseMetadata(row.metadata);
  return {
    id: str(row.id),
    sessionId: str(row.task_session_id),
    taskId: str(row.task_id),
    turnId: str(row.turn_id),
    authorType: str(row.author_type),
    authorId: str(row.author_id),
    content: str(row.content),
    requestsInput: Number(row.requests_input) === 1,
    type: str(row.type),
    metadata,
    metadataValid: valid,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
  };
}

export function toSessionRecord(row: Row): SessionRecord {
  return {
    id: str(row.id),
    taskId: str(row.task_id),
    state: str(row.state),
    isPrimary: Number(row.is_primary) === 1,
    startedAt: ts(row.started_at),
    updatedAt: ts(row.updated_at),
  };
}

export function toTaskRecord(row: Row): TaskRecord {
  return {
    id: str(row.id),
    workspaceId: str(row.workspace_id),
    title: str(row.title),
    state: str(row.state),
    archivedAt: tsOrNull(row.archived_at),
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
  };
}
