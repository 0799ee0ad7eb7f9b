/** The reply of any endpoint, as far as the page reads it. */
export interface ReplyLike {
  ok: boolean;
  error?: { code: string; message: string };
  /** The plan-comment and queue endpoints' machine-readable detail of a conflict. */
  reason?: string;
  /** clarification.respond: false when the reply is a replay of the same outcome recorded before. */
  claimed?: boolean;
}

/** What the person was doing, for the few codes whose meaning depends on it. */
export type ReplyContext = 'question' | 'queue' | 'dead-letter' | 'task' | 'other';

/** The code a reply shows in `data-code`: `ok`, or the failure's code. */
export function replyCode(reply: ReplyLike): string {
  return reply.ok ? 'ok' : (reply.error?.code ?? 'internal');
}

const PERMISSION = /permissions? violation/i;

// The queue endpoints' conflict reasons (docs/endpoints.md, queue.*), said for a person.
const QUEUE_CONFLICTS: Record<string, string> = {
  session_unavailable: 'The session cannot take a prompt now (it is busy, or not running); nothing was sent.',
  entry_in_flight: 'That prompt is being delivered right now, so it can no longer be changed.',
  queue_changed: 'The queue changed meanwhile (someone else edited it); it was reloaded.',
  queue_empty: 'No prompt is waiting, so there is nothing to send.',
  live_clarification: 'The session is waiting for the answer to a question; answer it first.',
  task_inactive: 'The task is no longer active, so nothing was sent.',
};

/**
 * One sentence a person understands for a reply's code, without its machine details. The endpoint's
 * own message stays available beside it (a title) for whoever needs it.
 */
export function replySentence(reply: ReplyLike, context: ReplyContext = 'other'): string {
  if (reply.ok) return reply.claimed === false ? 'This same answer was already recorded (sent before, from here or elsewhere); nothing changed.' : 'Done.';
  const code = reply.error?.code;
  const message = reply.error?.message ?? '';
  switch (code) {
    case 'conflict':
      if (context === 'question') return 'Someone else answered this question first, or it is no longer waiting for an answer.';
      if (context === 'queue')
        return QUEUE_CONFLICTS[reply.reason ?? ''] ?? 'The queue changed meanwhile (someone else edited it, or the prompt was already sent); it was reloaded.';
      return 'The state changed meanwhile, so nothing was done; look again and retry if it still applies.';
    case 'retryable':
      if (context === 'question') return 'The answer did not reach the agent, so the question is open again; send it again.';
      return 'It did not go through; send it again.';
    case 'not_found':
      if (context === 'question') return 'This question no longer exists.';
      if (context === 'dead-letter') return 'This dead letter is gone (someone retried or removed it).';
      return 'It no longer exists.';
    case 'bad_request':
      return `The request was refused as invalid: ${message}`;
    case 'unavailable':
      if (PERMISSION.test(message)) return 'Your NATS user may not make this request; sign in as a user who may.';
      return 'No worker answered in time; the outcome is unknown. Trying again is safe.';
    case 'internal':
      return 'The worker failed unexpectedly; its log says why.';
    default:
      return `The worker refused: ${message || 'no reason given'}`;
  }
}

/** Fills a `[data-testid=reply]` element with a reply's code and sentence. */
export function showReply(element: HTMLElement, reply: ReplyLike, context: ReplyContext = 'other'): void {
  element.dataset.testid = 'reply';
  element.dataset.code = replyCode(reply);
  element.textContent = replySentence(reply, context);
  element.title = reply.ok ? '' : `${reply.error?.code ?? ''}: ${reply.error?.message ?? ''}${reply.reason ? ` (${reply.reason})` : ''}`;
  element.hidden = false;
}
