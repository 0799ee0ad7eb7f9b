import type { EventData } from '../contract/envelope.js';
import { INBOUND_SUBJECTS } from '../contract/subjects.js';
import { isTruthyFlag } from '../turns/lifecycleTurn.js';

export type Relevance = 'project' | 'skip' | 'unknown_type';

const PENDING_MESSAGE_TYPES = new Set(['clarification_request', 'permission_request']);
const KNOWN_TYPES = new Set<string>(INBOUND_SUBJECTS.filter((s) => !s.endsWith('>')));

/**
 * Whether an event can change a task's pending state. Streaming
 * `message.updated` of ordinary messages is the bulk of bus traffic and costs no database read.
 * `task.deleted` needs nothing: the summary row is deleted with the task.
 */
export function relevanceOf(eventType: string, data: EventData): Relevance {
  if (eventType.startsWith('permission_request.received')) return 'project';
  if (!KNOWN_TYPES.has(eventType)) return 'unknown_type';
  if (eventType === 'task.deleted') return 'skip';
  if (eventType === 'message.updated' || eventType === 'message.deleted') {
    const pendingShaped = (data.type !== undefined && PENDING_MESSAGE_TYPES.has(data.type)) || isTruthyFlag(data.requests_input);
    return pendingShaped ? 'project' : 'skip';
  }
  return 'project';
}
