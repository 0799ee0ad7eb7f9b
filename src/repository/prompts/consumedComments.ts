import { rawRows, type RepositoryContext } from '../context.js';
import { snapshotIn } from '../planComments/planComments.js';
import { writtenInstant, writtenNow, type PlanCommentRecord, type PlanCommentSnapshot } from '../planComments/planCommentRows.js';
import { bumpCommentsRevision, lockTaskPlan } from '../planComments/taskPlans.js';
import { isCanonicalTimestamp } from '../../timestamps.js';

/**
 * The plan comments a queue entry consumed, kept in its receipt's metadata
 * (`consumed_plan_comments`) from the accepting transaction on, so an entry that leaves without
 * being delivered (removed, cleared, cancelled) gives them back to the task's collection exactly as
 * they were: same ids, bodies, selections, anchors and creation times. Only a queued receipt keeps
 * them: a direct prompt is never withdrawn.
 */

export const CONSUMED_COMMENTS_KEY = 'consumed_plan_comments';
/** The text the user typed, apart from the expansion: what `queue.update` replaces. */
export const TYPED_CONTENT_KEY = 'typed_content';

/** The metadata value of the comments a queued prompt consumed. */
export function consumedCommentsMetadata(comments: readonly PlanCommentRecord[]): Array<Record<string, unknown>> {
  return comments.map((c) => ({
    id: c.id,
    plan_id: c.planId,
    body: c.body,
    selected_text: c.selectedText,
    anchor_from: c.anchorFrom,
    anchor_to: c.anchorTo,
    version: c.version,
    created_at: c.createdAt,
  }));
}

type ConsumedComment = Pick<PlanCommentRecord, 'id' | 'planId' | 'body' | 'selectedText' | 'anchorFrom' | 'anchorTo' | 'version' | 'createdAt'>;

const anchorOf = (v: unknown): number | null | undefined => (v === null ? null : Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : undefined);

/** One stored comment, or undefined when another producer's metadata left it unreadable. */
function readConsumed(item: unknown): ConsumedComment | undefined {
  if (item === null || typeof item !== 'object') return undefined;
  const c = item as Record<string, unknown>;
  const from = anchorOf(c.anchor_from);
  const to = anchorOf(c.anchor_to);
  const createdAt = typeof c.created_at === 'string' && isCanonicalTimestamp(c.created_at) ? c.created_at : undefined;
  if (typeof c.id !== 'string' || typeof c.plan_id !== 'string' || typeof c.body !== 'string' || typeof c.selected_text !== 'string') return undefined;
  if (from === undefined || to === undefined || !createdAt || !Number.isSafeInteger(c.version) || (c.version as number) < 1) return undefined;
  return { id: c.id, planId: c.plan_id, body: c.body, selectedText: c.selected_text, anchorFrom: from, anchorTo: to, version: c.version as number, createdAt };
}

/** The comments a receipt's metadata says it consumed, and the referenced ids it cannot give back (no readable copy). */
export function readConsumedComments(metadata: Record<string, unknown>): { comments: ConsumedComment[]; unreadable: string[] } {
  const stored = Array.isArray(metadata[CONSUMED_COMMENTS_KEY]) ? (metadata[CONSUMED_COMMENTS_KEY] as unknown[]) : [];
  const comments = stored.flatMap((item) => readConsumed(item) ?? []);
  const kept = new Set(comments.map((c) => c.id));
  const refs = Array.isArray(metadata.plan_comment_refs) ? (metadata.plan_comment_refs as unknown[]) : [];
  const unreadable = refs.flatMap((r) => {
    const id = r !== null && typeof r === 'object' ? (r as Record<string, unknown>).id : undefined;
    return typeof id === 'string' && !kept.has(id) ? [id] : [];
  });
  return { comments, unreadable };
}

export interface ReturnedComments {
  /** Back in the collection. */
  returned: string[];
  /** Not given back: the plan they belonged to is gone (deleted, or replaced by another), or the id is taken again. */
  dropped: string[];
  /** The collection afterwards; null when nothing came back (its revision did not move). */
  snapshot: PlanCommentSnapshot | null;
}

/**
 * Puts consumed comments back into the task's collection inside the caller's transaction, under the
 * plan row lock every collection write takes first, and moves the collection's revision once. A
 * comment whose plan is no longer the task's plan is dropped: it annotated text that is gone.
 */
export async function returnConsumedComments(tx: RepositoryContext, taskId: string, comments: readonly ConsumedComment[]): Promise<ReturnedComments> {
  if (comments.length === 0) return { returned: [], dropped: [], snapshot: null };
  const plan = await lockTaskPlan(tx, taskId);
  const returned: string[] = [];
  const dropped: string[] = [];
  const now = writtenNow(tx);
  for (const c of comments) {
    if (!plan || c.planId !== plan.id) {
      dropped.push(c.id);
      continue;
    }
    const inserted = await rawRows(
      tx,
      `INSERT INTO task_plan_comments (id, task_id, plan_id, body, selected_text, anchor_from, anchor_to, version, created_at, updated_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM task_plan_comments WHERE id = ?) RETURNING id`,
      [c.id, taskId, plan.id, c.body, c.selectedText, c.anchorFrom, c.anchorTo, c.version, writtenInstant(tx, c.createdAt), now, c.id],
    );
    (inserted.length > 0 ? returned : dropped).push(c.id);
  }
  if (returned.length === 0 || !plan) return { returned, dropped, snapshot: null };
  await bumpCommentsRevision(tx, plan);
  return { returned, dropped, snapshot: await snapshotIn(tx, taskId) };
}
