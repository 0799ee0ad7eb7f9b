import { createHash } from 'node:crypto';

/**
 * Request fingerprints: what makes two requests with one id "the same request" for a replay. A
 * fingerprint is the SHA-256 (hex) of the canonical JSON of the request's identity: object keys
 * sorted at every depth, no whitespace, `undefined` members left out. So key order, and the order
 * of the lists sorted below, never changes it.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json | undefined };

/** JSON with object keys sorted at every depth. */
export function canonicalJson(value: Json): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value)
    .filter((key) => value[key] !== undefined)
    .sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] as Json)}`).join(',')}}`;
}

function fingerprintOf(value: Json): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

export interface PlanCommentCreateIdentity {
  taskId: string;
  planId: string;
  body: string;
  selectedText: string;
  anchorFrom: number | null;
  anchorTo: number | null;
}

/** A create's identity: the same comment id with another body, text or anchor is another request. */
export function planCommentCreateFingerprint(identity: PlanCommentCreateIdentity): string {
  return fingerprintOf({
    kind: 'plan_comment.create',
    task_id: identity.taskId,
    plan_id: identity.planId,
    body: identity.body,
    selected_text: identity.selectedText,
    anchor_from: identity.anchorFrom,
    anchor_to: identity.anchorTo,
  });
}

/** A legacy draft's admission: the draft's identity, not its text (a repeat with edited text creates nothing either). */
export function legacyDraftFingerprint(taskId: string, sessionId: string, draftId: string): string {
  return fingerprintOf({ kind: 'plan_comment.import_legacy', task_id: taskId, session_id: sessionId, draft_id: draftId });
}

export interface PromptIdentity {
  callerId: string;
  /** Send names its session; Run names the task and means "its primary", whichever session that is. */
  target: { sessionId: string } | { taskId: string; requirePrimary: true };
  deliveryKind: 'direct' | 'queued';
  content: string;
  refs: ReadonlyArray<{ id: string; version: number }>;
  attachmentIds: readonly string[];
  model: string;
  planMode: boolean;
}

/**
 * A prompt's identity: what a replay under the same caller id must repeat. The preflight's observations (the primary it resolved,
 * the state it saw) are not part of it: a replay after the primary moved is still the same Run.
 */
export function promptRequestFingerprint(identity: PromptIdentity): string {
  const target = 'sessionId' in identity.target ? { session_id: identity.target.sessionId } : { task_id: identity.target.taskId, require_primary: true };
  return fingerprintOf({
    caller_id: identity.callerId,
    ...target,
    // A Run's kind is the service's choice (direct to an idle primary, queued behind a busy one),
    // not the caller's: a replay of either is the same Run.
    delivery_kind: 'sessionId' in identity.target ? identity.deliveryKind : 'routed',
    content: identity.content,
    refs: [...identity.refs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.version - b.version)).map((r) => ({ id: r.id, version: r.version })),
    attachment_ids: [...identity.attachmentIds].sort(),
    model: identity.model,
    plan_mode: identity.planMode,
  });
}
