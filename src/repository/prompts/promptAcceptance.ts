import { beginOrNest, type RepositoryContext } from '../context.js';
import { snapshotIn } from '../planComments/planComments.js';
import { badRequest, unavailable, type BadRequest, type Unavailable } from '../planComments/planCommentOutcomes.js';
import { promptRequestFingerprint } from '../requestFingerprint.js';
import type { PlanCommentSchema } from '../schema/planCommentTables.js';
import type { AcceptPromptInput, AcceptPromptResult } from './acceptedPrompt.js';
import { admit, ended, replayOf, taskOfTarget, type AcceptanceRequest } from './acceptanceChecks.js';
import { AcceptanceRefused, writeAcceptance } from './acceptanceWrites.js';

/**
 * The accepting transaction: ONE transaction that re-validates the task, the target session and the
 * referenced comments, expands exactly those comment rows (read inside it) into the visible prompt,
 * consumes them at their versions, claims the attachments, and writes the prompt's durable receipt
 * (a direct prompt also its turn and user message; a queued one only its queue entry, whose
 * transcript the dispatcher writes at reservation). Any failure writes nothing: an expected one is
 * decided before the first write or, after it, thrown inside the transaction so it rolls back
 * (a savepoint inside a caller's transaction). Locks in Kandev's order: the task row, the session's
 * turn-write lock, then rows. The caller id keys the writes and the replay: the same request under
 * it is `replayed`, another is `caller_id_conflict`. ADR 0002 gives the steps and the reasons.
 */

export * from './acceptedPrompt.js';

function duplicates(values: readonly string[]): boolean {
  return new Set(values).size !== values.length;
}

/** Pure: the request's own consistency, the tables it needs, and its fingerprint. */
function validateRequest(schema: PlanCommentSchema, input: AcceptPromptInput): AcceptanceRequest | BadRequest | Unavailable {
  const refs = input.planCommentRefs ?? [];
  const attachmentIds = input.attachmentIds ?? [];
  if (duplicates(refs.map((r) => r.id))) return badRequest('duplicate_refs', 'a plan comment is referenced more than once');
  if (duplicates(attachmentIds)) return badRequest('duplicate_attachment_ids', 'an attachment is named more than once');
  if (attachmentIds.length > 0 && !input.attachmentOwnerId) return badRequest('attachment_owner_required', 'attachment ids need the owner that staged them');
  const missing = [
    ...schema.missingForPrompts,
    ...(refs.length > 0 ? schema.missingForComments : []),
    ...(attachmentIds.length > 0 ? schema.missingForAttachments : []),
  ];
  if (missing.length > 0 || !schema.receiptTable) return unavailable('accepting a prompt', missing);
  const model = input.model ?? '';
  const planMode = input.planMode ?? false;
  const kind = input.deliveryKind ?? 'direct';
  if (kind === 'queued' && input.queueMaxPerSession === undefined) throw new TypeError('a queued prompt needs queueMaxPerSession');
  const fingerprint = promptRequestFingerprint({
    callerId: input.callerId,
    target: input.target.kind === 'session' ? { sessionId: input.target.sessionId } : { taskId: input.target.taskId, requirePrimary: true },
    deliveryKind: kind,
    content: input.content,
    refs,
    attachmentIds,
    model,
    planMode,
  });
  return { input, kind, refs, attachmentIds, receiptTable: schema.receiptTable, model, planMode, fingerprint };
}

/** Accepts one prompt of either kind, or says why not: validate, replay, lock and check, then write. */
export async function acceptPrompt(ctx: RepositoryContext, schema: PlanCommentSchema, input: AcceptPromptInput): Promise<AcceptPromptResult> {
  const req = validateRequest(schema, input);
  if (ended(req)) return req;
  let refusedTaskId: string | undefined;
  try {
    return await beginOrNest(ctx, async (tx): Promise<AcceptPromptResult> => {
      // A replay needs no lock: the rows an acceptance wrote under this caller id keep their identity.
      const replay = await replayOf(tx, schema, req);
      if (replay) return replay;
      const target = await taskOfTarget(tx, input.target);
      if (ended(target)) return target;
      refusedTaskId = target.taskId;
      const admitted = await admit(tx, schema, req, target.taskId);
      if (ended(admitted)) return admitted;
      return writeAcceptance(tx, schema, req, admitted);
    });
  } catch (err) {
    if (!(err instanceof AcceptanceRefused)) throw err;
    const outcome = err.outcome;
    // Rolled back: the collection as it is now, not as this transaction had changed it.
    if (outcome.code === 'conflict' && outcome.reason === 'plan_comments_changed' && refusedTaskId !== undefined) {
      return { ...outcome, snapshot: await snapshotIn(ctx, refusedTaskId) };
    }
    return outcome;
  }
}
