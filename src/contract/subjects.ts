/**
 * Subject names. Inbound subjects equal Kandev's event types; a deployment prefix (e.g. "acme.")
 * namespaces every subject, stream, consumer and bucket so deployments and test runs can share a
 * NATS server without touching each other.
 */

/** Event types that can change a task's pending state, captured by the worker's stream. */
export const INBOUND_SUBJECTS = [
  'message.added',
  'message.updated',
  'message.deleted',
  'turn.started',
  'turn.completed',
  'task_session.state_changed',
  'clarification.answered',
  'clarification.primary_answered',
  'clarification.cancelled',
  'clarification.stale_dismissed',
  'permission_request.received',
  'permission_request.received.>',
  'task.created',
  'task.updated',
  'task.deleted',
  // Published by this service after every queue change, and by Kandev's backend after every change
  // of its own queue (with `entries`, sometimes without task_id: the task is the session's);
  // consumed so the task's queued_prompt_count is reprojected, whoever changed the queue.
  'message.queue.status_changed',
] as const;

export const SUMMARY_UPDATED = 'task.status_summary.updated';
/** Kandev's name: its web client's handler of this type drops a payload without `workspace_id`. */
export const SESSION_PENDING_ACTION_CHANGED = 'session.pending_action_changed';
/** The full replacement of a task's plan-comment collection after every committed change. */
export const PLAN_COMMENTS_CHANGED = 'task_plan.comments.changed';
/** Kandev's event after a plan was deleted (`plan.delete` in owned mode): data is the deleted plan row. */
export const TASK_PLAN_DELETED = 'task_plan.deleted';
export const SERVICE_SUBJECT_ROOT = 'pending_projector.v1';
/** Kandev's event after a session's queue changed: `{session_id, task_id, entries, count, max, auto_run, merge_enabled}`. */
export const MESSAGE_QUEUE_STATUS_CHANGED = 'message.queue.status_changed';

export interface Topology {
  prefix: string;
  eventsStream: string;
  outputStream: string;
  deadLetterStream: string;
  consumer: string;
  summaryBucket: string;
  /** The JetStream stream behind the KV bucket (nats.js names it `KV_<bucket>`). */
  summaryBucketStream: string;
  inboundSubjects: string[];
  summarySubject: string;
  sessionPendingSubject: string;
  /** `<prefix>task_plan.comments.changed`, captured by the output stream. */
  planCommentsSubject: string;
  /** `<prefix>task_plan.deleted`, captured by the output stream. */
  planDeletedSubject: string;
  deadLetterSubject: string;
  /** Stream capturing detached-clarification resume commands (`<prefix>agent.*.resume`). */
  agentResumeStream: string;
  agentResumeSubjects: string[];
  /** Stream capturing prompts delivered to agents (`<prefix>agent.*.prompt`); its PubAck is a prompt's acceptance. */
  agentPromptStream: string;
  agentPromptSubjects: string[];
  serviceSubject(name: string): string;
  /** Where this service publishes a Kandev event of `type` (the worker's events stream captures it). */
  eventSubject(type: string): string;
  /** Request/reply subject the agent's live clarification waiter listens on. */
  agentWaiterSubject(sessionId: string): string;
  /** JetStream subject of a detached session's resume command. */
  agentResumeSubject(sessionId: string): string;
  /** JetStream subject of a session's prompts (durable prompt receipts, ADR 0002). */
  agentPromptSubject(sessionId: string): string;
}

/** Every name the worker uses, derived from one prefix. */
export function topologyFor(prefix: string): Topology {
  const token = prefix.replace(/\.$/, '').replace(/[^A-Za-z0-9_-]/g, '_');
  const upper = token ? `${token.toUpperCase()}_` : '';
  const lower = token ? `${token}_` : '';
  return {
    prefix,
    eventsStream: `${upper}PENDING_PROJECTOR_EVENTS`,
    outputStream: `${upper}PENDING_PROJECTOR_SUMMARIES`,
    deadLetterStream: `${upper}PENDING_PROJECTOR_DEAD_LETTERS`,
    consumer: `${lower}pending-projector`,
    summaryBucket: `${lower}pending_projector_summaries`,
    summaryBucketStream: `KV_${lower}pending_projector_summaries`,
    inboundSubjects: INBOUND_SUBJECTS.map((s) => `${prefix}${s}`),
    summarySubject: `${prefix}${SUMMARY_UPDATED}`,
    sessionPendingSubject: `${prefix}${SESSION_PENDING_ACTION_CHANGED}`,
    planCommentsSubject: `${prefix}${PLAN_COMMENTS_CHANGED}`,
    planDeletedSubject: `${prefix}${TASK_PLAN_DELETED}`,
    deadLetterSubject: `${prefix}pending_projector.dead_letter`,
    agentResumeStream: `${upper}PENDING_PROJECTOR_AGENT_RESUME`,
    agentResumeSubjects: [`${prefix}agent.*.resume`],
    agentPromptStream: `${upper}PENDING_PROJECTOR_AGENT_PROMPTS`,
    agentPromptSubjects: [`${prefix}agent.*.prompt`],
    serviceSubject: (name) => `${prefix}${SERVICE_SUBJECT_ROOT}.${name}`,
    eventSubject: (type) => `${prefix}${type}`,
    agentWaiterSubject: (sessionId) => `${prefix}agent.${sessionId}.clarification`,
    agentResumeSubject: (sessionId) => `${prefix}agent.${sessionId}.resume`,
    agentPromptSubject: (sessionId) => `${prefix}agent.${sessionId}.prompt`,
  };
}

/** Every JetStream stream the worker creates for a topology, including the KV bucket's. */
export function topologyStreams(topology: Topology): string[] {
  return [
    topology.eventsStream,
    topology.outputStream,
    topology.deadLetterStream,
    topology.agentResumeStream,
    topology.agentPromptStream,
    topology.summaryBucketStream,
  ];
}

/**
 * Whether `value` can stand as one subject token (no separators, wildcards or whitespace): session
 * ids are spliced into the agent subjects above.
 */
export function isSubjectToken(value: string): boolean {
  return /^[^.*>\s]+$/.test(value);
}

/** The event type of an inbound subject, without the deployment prefix. */
export function eventTypeOf(subject: string, prefix: string): string {
  return prefix && subject.startsWith(prefix) ? subject.slice(prefix.length) : subject;
}
