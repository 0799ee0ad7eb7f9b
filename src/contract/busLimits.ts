import { PLAN_COMMENT_LIMITS } from '../turns/planCommentPrompt.js';

/**
 * How large a message on the bus can get under this service's limits (ADR 0019), so the worker can
 * tell at start whether the NATS server's `max_payload` and MAX_EVENT_BYTES carry it.
 *
 * The limits count raw UTF-8 text, as Kandev does. JSON grows text when it escapes it: `"` and `\`
 * to two bytes, a control character to six (`\u0001`; Go's encoder also writes `<`, `>` and `&`
 * as six). So the bus is sized for the worst case, six bytes per byte of text, and no accepted
 * comment or prompt can become a message too large to send.
 */

/** The most bytes JSON encodes one byte of text into (`\u0000`). */
export const JSON_ESCAPE_FACTOR = 6;

/** What every message may carry besides its text and its items: the envelope, ids, options, attachments and refs. */
const MESSAGE_FIELDS_BYTES = 64 * 1024;

/** What one comment of a collection, or one entry of a queue, carries besides its text: ids, timestamps, anchors, model, metadata. */
const ITEM_FIELDS_BYTES = 8 * 1024;

/** What NATS headers add to a message (`Nats-Msg-Id` and this service's own), counted by the server against `max_payload`. */
export const HEADER_BYTES = 4 * 1024;

/** One of the largest messages the limits allow, and the bytes it may take. */
export interface LargestMessage {
  what: string;
  bytes: number;
}

const worstCase = (textBytes: number, items: number) => JSON_ESCAPE_FACTOR * textBytes + items * ITEM_FIELDS_BYTES + MESSAGE_FIELDS_BYTES;

/**
 * The largest message in each direction, largest first: a prompt request or the prompt delivered
 * to the agent (and Kandev's `message.added` of a user message that long), a whole collection (the
 * `task_plan.comments.changed` event and every reply carrying `plan_comments`), and a whole queue
 * (`message.queue.status_changed` and `queue.list`).
 */
export function largestMessages(settings: { queueMaxPerSession: number }): LargestMessage[] {
  const { promptMaxBytes, planTextMaxBytes, commentsPerPlan, queueTextMaxBytes } = PLAN_COMMENT_LIMITS;
  const messages: LargestMessage[] = [
    {
      what: `a prompt of ${promptMaxBytes} bytes (message.send, queue.enqueue, queue.update, the agent's prompt, message.added)`,
      bytes: worstCase(promptMaxBytes, 0),
    },
    {
      what: `a plan's ${commentsPerPlan} comments of ${planTextMaxBytes} bytes (task_plan.comments.changed, plan_comments replies)`,
      bytes: worstCase(planTextMaxBytes, commentsPerPlan),
    },
    {
      what: `a queue of ${settings.queueMaxPerSession} entries (QUEUE_MAX_PER_SESSION) of ${queueTextMaxBytes} bytes (message.queue.status_changed, queue.list)`,
      bytes: worstCase(queueTextMaxBytes, settings.queueMaxPerSession),
    },
  ];
  return messages.sort((a, b) => b.bytes - a.bytes);
}

/**
 * Why a server whose `max_payload` is `maxPayload` cannot carry this worker's messages, in one line
 * naming the setting and what needs it, or undefined when it can: it must take the largest message
 * the limits allow and any event or request MAX_EVENT_BYTES admits, each with its headers.
 */
export function busFitProblem(settings: { maxPayload: number; maxEventBytes: number; queueMaxPerSession: number }): string | undefined {
  const [largest] = largestMessages(settings);
  const forLimits = largest!.bytes + HEADER_BYTES;
  const forEvents = settings.maxEventBytes + HEADER_BYTES;
  const need = Math.max(forLimits, forEvents);
  if (settings.maxPayload >= need) return undefined;
  const why =
    forEvents >= forLimits
      ? `MAX_EVENT_BYTES=${settings.maxEventBytes}, the largest event or request it takes (or lower MAX_EVENT_BYTES)`
      : `${largest!.what}, JSON-escaped at worst`;
  return (
    `the NATS server's max_payload is ${settings.maxPayload} bytes; the worker needs at least ${need} for ${why}. ` +
    'Set max_payload in the nats-server configuration (e.g. max_payload: 8MB, as deploy/nats/nats-server.conf does) and restart the server'
  );
}
