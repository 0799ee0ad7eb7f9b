import { tableColumns, type SchemaTarget } from './catalog.js';
import { detectPlanCommentSchema, OWN_RECEIPT_TABLE, type ReceiptTable } from './planCommentTables.js';

/**
 * Where a database keeps queued prompts, for the summary's `queued_prompt_count`:
 * - `receiptTable`: this service's receipts (owned mode's `queued_messages`, or
 *   `pending_projector_prompt_receipts` beside Kandev), null when neither can hold them;
 * - `kandevQueue`: Kandev's own `queued_messages` (beside Kandev, without receipt columns), whose
 *   rows are Kandev's queue and count too.
 * A database with neither (Kandev's older schema) has no queued prompts: the count is 0.
 */
export interface QueuedPromptTables {
  readonly receiptTable: ReceiptTable | null;
  readonly kandevQueue: boolean;
}

/** What owned mode's migrations give. */
const OWNED_QUEUED_PROMPT_TABLES: QueuedPromptTables = { receiptTable: 'queued_messages', kandevQueue: false };

const KANDEV_QUEUE_COLUMNS = ['task_id', 'metadata_json'];

export async function detectQueuedPromptTables(target: SchemaTarget): Promise<QueuedPromptTables> {
  const { receiptTable } = await detectPlanCommentSchema(target);
  // Kandev's queue is `queued_messages` exactly when it is not where our receipts are.
  if (receiptTable === 'queued_messages') return { receiptTable, kandevQueue: false };
  const queue = (await tableColumns(target, ['queued_messages'])).get('queued_messages');
  const names = new Set((queue ?? []).map((c) => c.name.toLowerCase()));
  const kandevQueue = queue !== undefined && KANDEV_QUEUE_COLUMNS.every((c) => names.has(c));
  return { receiptTable: receiptTable === OWN_RECEIPT_TABLE ? receiptTable : null, kandevQueue };
}
