import { beginOrJoin, type RepositoryContext } from '../context.js';
import { collectionFull, collectionSize, lockedPlanOf, snapshotIn } from './planComments.js';
import { badRequest, type BadRequest, type Conflict, type NotFound } from './planCommentOutcomes.js';
import { writtenInstant, writtenNow, type PlanCommentSnapshot } from './planCommentRows.js';
import { legacyDraftFingerprint } from '../requestFingerprint.js';
import { legacyCommentId, previousLegacyCommentId } from './commentIds.js';
import { bumpCommentsRevision } from './taskPlans.js';
import { toCanonicalTimestamp } from '../../timestamps.js';
import { normalizeLineEndings, planCommentTextBytes } from '../../turns/planCommentPrompt.js';

/**
 * The one-time import of plan comments a browser kept in `sessionStorage` per session (Kandev's
 * `PlanComment` shape), into the task's one collection. Idempotent through the admissions ledger:
 * each draft's comment id is its own UUID or one derived from (task, session, draft id)
 * (commentIds.ts), and a draft whose id has an admission or a comment already (an earlier import,
 * Kandev's own browser migration, or an import before ids were UUIDs) is skipped, so repeating an
 * import, also after its comments were consumed or deleted, creates nothing. All or nothing.
 */

/** A browser draft, as Kandev's web client stores it. */
export interface LegacyPlanDraft {
  id: string;
  sessionId: string;
  text: string;
  /** RFC 3339 UTC; kept (canonicalised) as the comment's `created_at`, so the collection keeps the drafts' order. */
  createdAt: string;
  status?: string;
  source?: string;
  selectedText?: string;
  from?: number | null;
  to?: number | null;
}

type LegacySkipReason =
  /** Already delivered from the browser (`status: 'sent'`). */
  | 'sent'
  /** Not a plan comment (`source` other than `plan`). */
  | 'not_plan'
  /** No text. */
  | 'empty'
  /** Imported before (its admission exists), whether or not the comment still exists. */
  | 'already_imported'
  /** The same (session, draft id) earlier in this import. */
  | 'duplicate';

export type ImportLegacyResult =
  | { ok: true; imported: string[]; skipped: Array<{ id: string; sessionId: string; reason: LegacySkipReason }>; snapshot: PlanCommentSnapshot }
  | NotFound
  | BadRequest
  | Extract<Conflict, { reason: 'plan_comments_full' }>;

export function importLegacyPlanComments(ctx: RepositoryContext, input: { taskId: string; drafts: readonly LegacyPlanDraft[] }): Promise<ImportLegacyResult> {
  // Every draft's instant is checked before anything is written: a malformed one refuses the import.
  const createdAts: string[] = [];
  for (const draft of input.drafts) {
    try {
      createdAts.push(toCanonicalTimestamp(draft.createdAt));
    } catch {
      return Promise.resolve(badRequest('invalid_draft', `draft ${draft.id}: createdAt ${JSON.stringify(draft.createdAt)} is not a UTC timestamp`));
    }
  }
  return beginOrJoin(ctx, async (tx): Promise<ImportLegacyResult> => {
    const plan = await lockedPlanOf(tx, input.taskId, undefined);
    if ('ok' in plan) return plan;
    const skipped: Array<{ id: string; sessionId: string; reason: LegacySkipReason }> = [];
    const accepted: Array<{ draft: LegacyPlanDraft; commentId: string; createdAt: string }> = [];
    const seen = new Set<string>();
    for (const [index, draft] of input.drafts.entries()) {
      const commentId = legacyCommentId(input.taskId, draft.sessionId, draft.id);
      const skip = (reason: LegacySkipReason) => skipped.push({ id: draft.id, sessionId: draft.sessionId, reason });
      if (seen.has(commentId)) skip('duplicate');
      else if (draft.status === 'sent') skip('sent');
      else if (draft.source !== undefined && draft.source !== 'plan') skip('not_plan');
      else if (draft.text.trim() === '') skip('empty');
      else if (await importedBefore(tx, commentId, previousLegacyCommentId(input.taskId, draft.sessionId, draft.id))) skip('already_imported');
      else accepted.push({ draft, commentId, createdAt: createdAts[index]! });
      seen.add(commentId);
    }
    if (accepted.length === 0) return { ok: true, imported: [], skipped, snapshot: await snapshotIn(tx, input.taskId) };
    const present = await collectionSize(tx, plan);
    const adding = accepted.reduce(
      (bytes, { draft }) =>
        bytes + planCommentTextBytes({ body: normalizeLineEndings(draft.text), selected_text: normalizeLineEndings(draft.selectedText ?? '') }),
      0,
    );
    const full = await collectionFull(
      tx,
      plan,
      { count: present.count + accepted.length, textBytes: present.textBytes + adding },
      `importing ${accepted.length} drafts`,
    );
    if (full) return full;
    const now = writtenNow(tx);
    for (const { draft, commentId, createdAt } of accepted) {
      await tx.knex('task_plan_comments').insert({
        id: commentId,
        task_id: input.taskId,
        plan_id: plan.id,
        body: normalizeLineEndings(draft.text),
        selected_text: normalizeLineEndings(draft.selectedText ?? ''),
        anchor_from: draft.from ?? null,
        anchor_to: draft.to ?? null,
        version: 1,
        created_at: writtenInstant(tx, createdAt),
        updated_at: now,
      });
      await tx.knex('task_plan_comment_admissions').insert({
        id: commentId,
        task_id: input.taskId,
        plan_id: plan.id,
        request_fingerprint: legacyDraftFingerprint(input.taskId, draft.sessionId, draft.id),
        created_at: now,
      });
    }
    await bumpCommentsRevision(tx, plan);
    return { ok: true, imported: accepted.map((a) => a.commentId), skipped, snapshot: await snapshotIn(tx, input.taskId) };
  });
}

/** Whether the draft is in the collection or its ledger already, under its id or the id the first imports gave it. */
async function importedBefore(tx: RepositoryContext, commentId: string, previousId: string): Promise<boolean> {
  const ids = [commentId, previousId];
  const admitted = await tx.knex('task_plan_comment_admissions').whereIn('id', ids).first();
  if (admitted) return true;
  return (await tx.knex('task_plan_comments').whereIn('id', ids).first()) !== undefined;
}
