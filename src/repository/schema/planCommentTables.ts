import { tableColumns, type SchemaTarget } from './catalog.js';
import { detectSchema } from './schemaMode.js';

/**
 * The tables behind task-owned plan comments and prompt receipts (ADR 0002), and which of them a
 * database has. Owned mode creates them all (migration 0004). Beside Kandev's tables they are
 * Kandev's to create (its backend implemented the ADR); an older Kandev database lacks them, and
 * this service never creates them there. So they are not among the tables the schema mode requires
 * (serviceTables.ts): a database without them runs everything else, and each feature that needs a
 * missing table answers `unavailable`, naming it.
 *
 * The receipt table differs by mode: owned mode's `queued_messages` carries this project's receipt
 * columns; beside Kandev, whose `queued_messages` has no such columns and whose queue drain would
 * deliver any row found there, receipts live in this service's own `pending_projector_prompt_receipts`
 * (kandev_mode_0002_prompt_receipts), with the same columns. Which one is read from the catalog.
 */

const PLAN_COMMENT_COLUMNS = {
  task_plans: ['id', 'task_id', 'comments_revision', 'created_at', 'updated_at'],
  task_plan_comments: ['id', 'task_id', 'plan_id', 'body', 'selected_text', 'anchor_from', 'anchor_to', 'version', 'created_at', 'updated_at'],
  task_plan_comment_admissions: ['id', 'task_id', 'plan_id', 'request_fingerprint', 'created_at'],
} as const;

const ATTACHMENT_COLUMNS = {
  task_message_attachments: [
    'id',
    'owner_id',
    'workspace_id',
    'task_id',
    'session_id',
    'message_id',
    'queue_id',
    'name',
    'mime_type',
    'kind',
    'delivery_mode',
    'size_bytes',
    'storage_key',
    'state',
    'expires_at',
    'created_at',
    'updated_at',
  ],
} as const;

const PROMPT_SEQ_COLUMNS = { task_session_prompt_seq: ['task_session_id', 'last_seq'] } as const;

/** Every column a receipt statement names, in both receipt tables. */
const RECEIPT_COLUMNS = [
  'id',
  'session_id',
  'task_id',
  'position',
  'content',
  'model',
  'plan_mode',
  'attachments_json',
  'metadata_json',
  'queued_at',
  'queued_by',
  'delivery_kind',
  'delivery_reservation_token',
  'delivery_reservation_owner',
  'delivery_reservation_expires_at',
  'delivery_attempted_at',
  'delivery_attempts',
  'next_attempt_at',
  'last_error',
  'durable_transcript_message_id',
  'durable_transcript_turn_id',
  'version',
] as const;

/** This service's own queue records, the same in both modes (migrations 0005, kandev_mode_0003). */
const QUEUE_RECORD_COLUMNS = {
  pending_projector_queue_revisions: ['session_id', 'revision'],
  pending_projector_prompt_outcomes: ['id', 'session_id', 'task_id', 'delivery_kind', 'status', 'reason', 'request_fingerprint', 'detail_json', 'settled_at'],
} as const;

/** Kandev's per-session queue state: its auto-run flag is the queue's pause. */
const QUEUE_STATE_COLUMNS = { queue_session_state: ['session_id', 'auto_run'] } as const;

export const OWN_RECEIPT_TABLE = 'pending_projector_prompt_receipts';
export type ReceiptTable = 'queued_messages' | typeof OWN_RECEIPT_TABLE;

/** What a database offers the plan-comment store; each list names `table` or `table.column`. */
export interface PlanCommentSchema {
  /** Missing for the collection (snapshot, create, update, delete, plan.delete, import) and for prompts carrying comment refs. */
  readonly missingForComments: readonly string[];
  /** Missing for staging attachments and for prompts carrying attachment ids. */
  readonly missingForAttachments: readonly string[];
  /** Missing for accepting any prompt (the prompt-sequence counter, a receipt table, the queue's revision and outcome records). */
  readonly missingForPrompts: readonly string[];
  /** Where receipts are written, or null when neither table can hold them. */
  readonly receiptTable: ReceiptTable | null;
  /** Whether Kandev's `queue_session_state (session_id, auto_run)` exists: without it no queue can be paused. */
  readonly queueState: boolean;
  /**
   * Whether the plans are Kandev's (the `kandev` schema mode): Kandev's plan service is then the only
   * one that deletes a plan (it keeps the plan's revisions and publishes `task_plan.deleted`), so
   * `plan.delete` is refused here.
   */
  readonly kandevOwnsPlans: boolean;
}

/** Every table and column present: what owned mode's migration 0004 gives. */
export const COMPLETE_PLAN_COMMENT_SCHEMA: PlanCommentSchema = {
  missingForComments: [],
  missingForAttachments: [],
  missingForPrompts: [],
  receiptTable: 'queued_messages',
  queueState: true,
  kandevOwnsPlans: false,
};

function missingOf(catalog: Map<string, Array<{ name: string }>>, wanted: Readonly<Record<string, readonly string[]>>): string[] {
  const missing: string[] = [];
  for (const [table, columns] of Object.entries(wanted)) {
    const found = catalog.get(table);
    if (!found) {
      missing.push(table);
      continue;
    }
    const names = new Set(found.map((c) => c.name.toLowerCase()));
    for (const column of columns) if (!names.has(column)) missing.push(`${table}.${column}`);
  }
  return missing;
}

/** Reads the catalog: which plan-comment, attachment and receipt tables exist, with the columns the store names, and whose plans they are. */
export async function detectPlanCommentSchema(target: SchemaTarget): Promise<PlanCommentSchema> {
  const catalog = await tableColumns(target, [
    ...Object.keys(PLAN_COMMENT_COLUMNS),
    ...Object.keys(ATTACHMENT_COLUMNS),
    ...Object.keys(PROMPT_SEQ_COLUMNS),
    ...Object.keys(QUEUE_RECORD_COLUMNS),
    'queued_messages',
    OWN_RECEIPT_TABLE,
    'queue_session_state',
  ]);
  const receiptMissing = (table: ReceiptTable) => missingOf(catalog, { [table]: RECEIPT_COLUMNS });
  // Our own table wins where it exists: it is only created beside Kandev's queue.
  let receiptTable: ReceiptTable | null = null;
  let missingReceipt: string[] = [];
  if (catalog.has(OWN_RECEIPT_TABLE)) {
    missingReceipt = receiptMissing(OWN_RECEIPT_TABLE);
    receiptTable = missingReceipt.length === 0 ? OWN_RECEIPT_TABLE : null;
  } else if (catalog.has('queued_messages') && receiptMissing('queued_messages').length === 0) {
    receiptTable = 'queued_messages';
  } else {
    missingReceipt = [OWN_RECEIPT_TABLE];
  }
  return {
    missingForComments: missingOf(catalog, PLAN_COMMENT_COLUMNS),
    missingForAttachments: missingOf(catalog, ATTACHMENT_COLUMNS),
    missingForPrompts: [...missingOf(catalog, PROMPT_SEQ_COLUMNS), ...missingOf(catalog, QUEUE_RECORD_COLUMNS), ...missingReceipt],
    receiptTable,
    queueState: missingOf(catalog, QUEUE_STATE_COLUMNS).length === 0,
    kandevOwnsPlans: (await detectSchema(target)).shape === 'kandev',
  };
}
