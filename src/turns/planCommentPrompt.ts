/**
 * The deterministic expansion of pending plan comments into the visible prompt. Pure and
 * dependency-free, so a UI can preview exactly the text the backend will send; the backend calls
 * it with the comment rows it read inside the accepting transaction, never with text a client sent.
 *
 * Kandev's `### Plan Comments` block: per comment in (created_at, id) order, the selected text in a
 * backtick fence one longer than any run inside it (at least three), then the body as `> ` lines;
 * then `---` and the content. Line endings become LF; nothing else is trimmed or escaped. Empty
 * content gives the block alone, no comments the content alone. ADR 0002 ("The prompt text") gives
 * the exact layout; unit tests pin the bytes.
 */

/** A comment as the formatter needs it: the wire shape of a snapshot's comment (`plan_comment.list`). */
export interface PromptPlanComment {
  readonly id: string;
  readonly body: string;
  readonly selected_text: string;
  readonly created_at: string;
}

/**
 * The plan-comment and prompt size limits, Kandev's: in UTF-8 bytes of the text as sent (a body
 * after trimming), so any comment or prompt Kandev accepted is accepted here. Endpoints check the
 * per-field ones; the store the rest. The bus is sized for the largest message they allow
 * (src/contract/busLimits.ts, ADR 0019).
 */
export const PLAN_COMMENT_LIMITS = {
  /** UTF-8 bytes of a comment body after trimming: 1 to this. */
  bodyMaxBytes: 64 * 1024,
  /** UTF-8 bytes of a comment's selected text. */
  selectedTextMaxBytes: 256 * 1024,
  /** Pending comments in one plan's collection. */
  commentsPerPlan: 100,
  /** UTF-8 bytes of the bodies and selected texts of one plan's pending comments together (planCommentTextBytes). */
  planTextMaxBytes: 1024 * 1024,
  /** Comment references in one prompt. */
  refsPerPrompt: 50,
  /** UTF-8 bytes of a prompt's typed content, and of the expanded prompt. */
  promptMaxBytes: 1024 * 1024,
  /**
   * UTF-8 bytes of the prompts a session's waiting queue holds together. Not Kandev's (it bounds
   * only the count): what keeps `message.queue.status_changed` and `queue.list`, which carry every
   * waiting entry, within the bus; one prompt of promptMaxBytes always fits an empty queue.
   */
  queueTextMaxBytes: 1024 * 1024,
} as const;

export const PLAN_COMMENTS_HEADING = '### Plan Comments';
export const PLAN_COMMENTS_SEPARATOR = '---';

/** CRLF and lone CR to LF: the one line ending stored and sent. */
export function normalizeLineEndings(text: string): string {
  return text.replace(/\r\n?/g, '\n');
}

/** The backtick fence for `selectedText`: longer than any backtick run in it, and at least three. */
export function fenceFor(selectedText: string): string {
  let longest = 0;
  for (const run of selectedText.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  return '`'.repeat(Math.max(3, longest + 1));
}

const RFC3339 = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(?:Z|\+00:00)$/;

/**
 * Sort key of a timestamp: date, time and the fraction padded to nine digits, so an exact second
 * sorts before `.000000001` and Kandev's SQLite text (`2026-09-02 10:00:00.5+00:00`) sorts with the
 * canonical form. Any other text sorts as given.
 */
function instantKey(value: string): string {
  const match = RFC3339.exec(value);
  if (!match) return value;
  return `${match[1]}T${match[2]}.${(match[3] ?? '').padEnd(9, '0')}Z`;
}

/** (created_at, id) ascending, ids by code unit as the database's binary order. */
export function comparePromptPlanComments(a: PromptPlanComment, b: PromptPlanComment): number {
  const ka = instantKey(a.created_at);
  const kb = instantKey(b.created_at);
  if (ka !== kb) return ka < kb ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function commentBlock(comment: PromptPlanComment): string {
  const selected = normalizeLineEndings(comment.selected_text);
  const quoted = normalizeLineEndings(comment.body)
    .split('\n')
    .map((line) => `> ${line}\n`)
    .join('');
  if (selected === '') return `${quoted}\n`;
  const fence = fenceFor(selected);
  return `${fence}\n${selected}\n${fence}\n${quoted}\n`;
}

/** The visible prompt for `comments` (any order: they are sorted here) and the typed `content`. */
export function formatPlanCommentPrompt(comments: readonly PromptPlanComment[], content: string): string {
  const typed = normalizeLineEndings(content);
  if (comments.length === 0) return typed;
  const block = `${PLAN_COMMENTS_HEADING}\n\n${[...comments].sort(comparePromptPlanComments).map(commentBlock).join('')}`;
  if (typed.trim() === '') return block;
  return `${block}${PLAN_COMMENTS_SEPARATOR}\n\n${typed}`;
}

/** UTF-8 length of `text`, without TextEncoder allocation per call site. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (const char of text) {
    const cp = char.codePointAt(0)!;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}

/** What a comment counts against PLAN_COMMENT_LIMITS.planTextMaxBytes: the UTF-8 bytes of its body and selected text as stored. */
export function planCommentTextBytes(comment: { readonly body: string; readonly selected_text: string }): number {
  return utf8Length(comment.body) + utf8Length(comment.selected_text);
}
