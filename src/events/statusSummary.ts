import { isPendingAction, type PendingAction } from '../turns/pendingAction.js';
import { ERROR_CODES, PendingProjectorError } from '../errors.js';
import type { PublishedSummary } from '../contract/publishedSummary.js';

/**
 * Kandev's task status summary. This worker owns two fields: `pending_action`, and, since it
 * admits queued prompts, `queued_prompt_count`, the task's waiting
 * queued prompts (omitted at 0, as Kandev does). Every other field (activity, sessions, errors, Git,
 * pull requests, and anything a newer producer adds) is carried through untouched.
 *
 * The stored `summary` text is the semantic JSON: every field except `revision` and `updated_at`,
 * known fields in Kandev's order, unknown fields after them, nested keys sorted, so two equal
 * summaries are equal text and the database compare-and-set sees only semantic change.
 */

const SUMMARY_FIELD_ORDER = [
  'last_activity_at',
  'primary_session',
  'foreground_activity',
  'active_subagent_count',
  'pending_action',
  'active_error',
  'git',
  'pull_request',
  'queued_prompt_count',
] as const;

const TRANSPORT_FIELDS = new Set(['revision', 'updated_at']);

export type SemanticSummary = Readonly<Record<string, unknown>>;

export class SummaryParseError extends PendingProjectorError {
  override name = 'SummaryParseError';
  constructor(message: string) {
    super(ERROR_CODES.SUMMARY_CORRUPT, message);
  }
}

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortDeep);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = sortDeep((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

/** Canonical semantic JSON text of a summary (transport fields dropped). */
export function canonicalSummaryJson(summary: SemanticSummary): string {
  const ordered: Record<string, unknown> = {};
  for (const key of SUMMARY_FIELD_ORDER) if (summary[key] !== undefined) ordered[key] = sortDeep(summary[key]);
  for (const key of Object.keys(summary).sort()) {
    if (TRANSPORT_FIELDS.has(key) || (SUMMARY_FIELD_ORDER as readonly string[]).includes(key)) continue;
    if (summary[key] !== undefined) ordered[key] = sortDeep(summary[key]);
  }
  return JSON.stringify(ordered);
}

/** Parses a stored `summary` column. Throws SummaryParseError on anything but a JSON object. */
export function parseStoredSummary(text: string): SemanticSummary {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SummaryParseError(`stored summary is not JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new SummaryParseError('stored summary is not a JSON object');
  const semantic: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) if (!TRANSPORT_FIELDS.has(key)) semantic[key] = v;
  return semantic;
}

export function pendingActionOf(summary: SemanticSummary): PendingAction | null {
  return isPendingAction(summary.pending_action) ? summary.pending_action : null;
}

/** A copy with `pending_action` replaced; an empty action is omitted, as Kandev does. */
export function withPendingAction(summary: SemanticSummary, action: PendingAction | null): SemanticSummary {
  const next: Record<string, unknown> = { ...summary };
  if (action) next.pending_action = action;
  else delete next.pending_action;
  return next;
}

/** The stored `queued_prompt_count`: 0 when omitted or not a non-negative integer. */
export function queuedPromptCountOf(summary: SemanticSummary): number {
  const count = summary.queued_prompt_count;
  return typeof count === 'number' && Number.isSafeInteger(count) && count > 0 ? count : 0;
}

/** A copy with `queued_prompt_count` replaced; 0 is omitted, as Kandev does. */
export function withQueuedPromptCount(summary: SemanticSummary, count: number): SemanticSummary {
  const next: Record<string, unknown> = { ...summary };
  if (count > 0) next.queued_prompt_count = count;
  else delete next.queued_prompt_count;
  return next;
}

/** The summary fields this service owns: every other field is carried through untouched. */
export const OWNED_SUMMARY_FIELDS = ['pending_action', 'queued_prompt_count'] as const;

export type OwnedSummaryField = (typeof OWNED_SUMMARY_FIELDS)[number];

/** The owned fields' values as stored, an omitted one read as Kandev omits it (no action, a count of 0); other values kept as they are. */
export function ownedFieldsOf(summary: SemanticSummary): Record<OwnedSummaryField, unknown> {
  return { pending_action: summary.pending_action ?? null, queued_prompt_count: summary.queued_prompt_count ?? 0 };
}

export function semanticallyEqual(a: SemanticSummary, b: SemanticSummary): boolean {
  return canonicalSummaryJson(a) === canonicalSummaryJson(b);
}

export function toPublishedSummary(summary: SemanticSummary, revision: number, updatedAt: string): PublishedSummary {
  return { revision, updated_at: updatedAt, ...(JSON.parse(canonicalSummaryJson(summary)) as Record<string, unknown>) };
}
