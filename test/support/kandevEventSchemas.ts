import { readdirSync, readFileSync } from 'node:fs';
import { z } from 'zod';

/**
 * zod schemas of the Kandev events this service publishes or consumes, derived from the examples
 * in testdata/kandev-events/ (one per type). Each names the data fields Kandev's consumers read,
 * with Kandev's types; objects stay open, because a field Kandev does not have may be added.
 */

const KANDEV_EVENTS_DIR = new URL('../../testdata/kandev-events/', import.meta.url);

const id = z.string().min(1);
// RFC 3339 with an optional fraction (Kandev's RFC3339Nano) and a zone.
const timestamp = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/);
const count = z.number().int().nonnegative();
const metadata = z.record(z.string(), z.unknown());

const message = z.object({
  message_id: id,
  session_id: id,
  task_id: id,
  turn_id: z.string(),
  author_type: z.enum(['user', 'agent']),
  author_id: z.string(),
  content: z.string(),
  type: z.string().min(1),
  requests_input: z.boolean(),
  metadata,
  created_at: timestamp,
  updated_at: timestamp,
});

const queueEntry = z.object({
  id,
  session_id: id,
  task_id: id,
  position: z.number().int(),
  content: z.string(),
  model: z.string(),
  plan_mode: z.boolean(),
  attachments: z.array(z.unknown()),
  metadata,
  queued_at: timestamp,
  queued_by: z.string(),
});

const planComment = z.object({
  id,
  body: z.string(),
  selected_text: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
});

const clarificationOutcome = {
  session_id: id,
  task_id: id,
  pending_id: id,
  rejected: z.boolean(),
  reject_reason: z.string(),
};

/** Published by this service (the e2e suites check every one the worker sends). */
export const PUBLISHED_EVENT_SCHEMAS = {
  'task.status_summary.updated': z.object({
    task_id: id,
    workspace_id: z.string(),
    status_summary: z.object({ revision: count, updated_at: timestamp, pending_action: z.enum(['clarification', 'permission']).optional() }),
  }),
  'session.pending_action_changed': z.object({
    workspace_id: id,
    task_id: id,
    session_id: id,
    pending_action: z.enum(['clarification', 'permission']).nullable(),
    pending_action_revision: z.object({ epoch: z.string().min(1), sequence: count }),
  }),
  'task_plan.comments.changed': z.object({ task_id: id, plan_id: id.nullable(), revision: count, comments: z.array(planComment) }),
  'task_plan.deleted': z.object({
    id,
    task_id: id,
    title: z.string(),
    content: z.string(),
    created_by: z.string(),
    created_at: timestamp,
    updated_at: timestamp,
  }),
  'clarification.primary_answered': z.object({ ...clarificationOutcome, clarification_turn_id: id, question: z.string(), answer_text: z.string() }),
  'clarification.stale_dismissed': z.object({ session_id: id, task_id: id, pending_id: id, clarification_turn_id: id, reject_reason: z.string() }),
  'message.queue.status_changed': z.object({
    session_id: id,
    // Kandev's backend sometimes leaves it out (the task is then the session's).
    task_id: id.optional(),
    entries: z.array(queueEntry),
    count,
    max: count,
    auto_run: z.boolean(),
    merge_enabled: z.boolean(),
  }),
  'message.added': message,
  'message.updated': message,
  'turn.started': z.object({ id, session_id: id, task_id: id, started_at: timestamp, created_at: timestamp, updated_at: timestamp, metadata }),
  'task_session.state_changed': z.object({ task_id: id, session_id: id, old_state: z.string(), new_state: z.string().min(1) }),
} as const;

/** Consumed only: the fields the worker reads to find the task to reproject. */
const CONSUMED_ONLY_SCHEMAS = {
  'message.deleted': message,
  'turn.completed': z.object({ session_id: id, task_id: id }),
  'clarification.answered': z.object(clarificationOutcome),
  'clarification.cancelled': z.object(clarificationOutcome),
  'permission_request.received': z.object({ task_id: id, session_id: id, pending_id: id }),
  'task.created': z.object({ task_id: id, workspace_id: z.string() }),
  'task.updated': z.object({ task_id: id, workspace_id: z.string() }),
  'task.deleted': z.object({ task_id: id }),
} as const;

export const KANDEV_EVENT_SCHEMAS: Record<string, z.ZodObject> = { ...PUBLISHED_EVENT_SCHEMAS, ...CONSUMED_ONLY_SCHEMAS };

const envelope = z.object({ id, type: z.string(), subject: z.string(), source: z.string(), timestamp, data: z.record(z.string(), z.unknown()) });

/**
 * Why an event the worker published on `<prefix><type>` is not in Kandev's form, or null when it
 * is (or is no Kandev event). The type comes from the subject, since that is what Kandev routes on.
 */
export function kandevEventViolation(type: string, payload: unknown): string | null {
  const schema = KANDEV_EVENT_SCHEMAS[type];
  if (!schema) return null;
  const parsed = envelope.safeParse(payload);
  if (!parsed.success) return `${type}: not Kandev's envelope: ${z.prettifyError(parsed.error)}`;
  if (parsed.data.type !== type) return `${type}: envelope type is ${JSON.stringify(parsed.data.type)}`;
  const data = schema.safeParse(parsed.data.data);
  return data.success ? null : `${type}: ${z.prettifyError(data.error)}`;
}

/** The example envelopes, by the type their file is named after. */
export function kandevEventExamples(): Map<string, unknown> {
  const files = readdirSync(KANDEV_EVENTS_DIR).filter((f) => f.endsWith('.json'));
  return new Map(files.map((f) => [f.slice(0, -'.json'.length), JSON.parse(readFileSync(new URL(f, KANDEV_EVENTS_DIR), 'utf8')) as unknown]));
}
