import type { NatsPermissionNeed } from '../../events/natsPermissions.js';
import { eventConsumers } from '../../events/natsTopology.js';
import {
  CLARIFICATION_PRIMARY_ANSWERED,
  CLARIFICATION_STALE_DISMISSED,
  MESSAGE_ADDED,
  MESSAGE_QUEUE_STATUS_CHANGED,
  MESSAGE_UPDATED,
  TASK_SESSION_STATE_CHANGED,
  TURN_STARTED,
} from '../../contract/kandevEvents.js';
import { PLAN_COMMENTS_CHANGED, SESSION_PENDING_ACTION_CHANGED, TASK_PLAN_DELETED, topologyStreams, type Topology } from '../../contract/subjects.js';

/** Every Kandev event type the worker publishes, under the subject prefix. */
const KANDEV_EVENTS_PUBLISHED = [
  SESSION_PENDING_ACTION_CHANGED,
  PLAN_COMMENTS_CHANGED,
  TASK_PLAN_DELETED,
  MESSAGE_QUEUE_STATUS_CHANGED,
  MESSAGE_ADDED,
  MESSAGE_UPDATED,
  TURN_STARTED,
  TASK_SESSION_STATE_CHANGED,
  CLARIFICATION_PRIMARY_ANSWERED,
  CLARIFICATION_STALE_DISMISSED,
];

/**
 * The permissions the worker's start probes (probeNatsPermissions): every JetStream API call of its
 * topology, consumer and message reads, its acks, its KV puts, its dead letters, its deliveries to
 * agents, its inbox, the dead-letter reads, and the Kandev events it publishes or re-injects
 * (dead_letter.retry), with a no-op envelope, since Kandev reads them. What it does not probe: its endpoints' subscriptions (checked as they are made,
 * startServiceEndpoints), its summaries (UI subscribers read every message there as a summary) and
 * the turn-start hook (a request someone answers; denied at first use, logged with the subject).
 * deploy/nats grants all of them to the `worker` user; docs/security.md lists them.
 */
export function workerPermissionNeeds(topology: Topology, inboxPrefix: string, partitions = 1): NatsPermissionNeed[] {
  const api = (subject: string, purpose: string): NatsPermissionNeed => ({ operation: 'publish', subject: `$JS.API.${subject}`, purpose });
  const streams = topologyStreams(topology);
  const events = topology.eventsStream;
  const consumer = topology.consumer;
  return [
    api('INFO', 'JetStream account info'),
    ...streams.flatMap((stream) => [api(`STREAM.INFO.${stream}`, `topology: stream ${stream}`), api(`STREAM.CREATE.${stream}`, `topology: stream ${stream}`)]),
    // The KV bucket's stream is only ever created; the others are updated when their subjects change.
    ...streams.filter((s) => s !== topology.summaryBucketStream).map((stream) => api(`STREAM.UPDATE.${stream}`, `topology: stream ${stream}`)),
    api(`CONSUMER.INFO.${events}.${consumer}`, `the durable consumer ${consumer}`),
    api(`CONSUMER.CREATE.${events}.${consumer}`, `the durable consumer ${consumer}`),
    // With EVENT_PARTITIONS, the shared consumer is only read (where the partitions start); each partition's is pulled.
    ...eventConsumers(topology, partitions).flatMap((name): NatsPermissionNeed[] => [
      ...(name === consumer
        ? []
        : [api(`CONSUMER.INFO.${events}.${name}`, `the durable consumer ${name}`), api(`CONSUMER.CREATE.${events}.${name}`, `the durable consumer ${name}`)]),
      api(`CONSUMER.MSG.NEXT.${events}.${name}`, 'pulling events'),
      { operation: 'publish', subject: `$JS.ACK.${events}.${name}.>`, purpose: 'acknowledging events' },
    ]),
    api(`STREAM.MSG.GET.${topology.agentResumeStream}`, 'checking a stored resume command'),
    api(`STREAM.MSG.GET.${topology.agentPromptStream}`, 'checking a stored prompt'),
    api(`STREAM.MSG.GET.${topology.deadLetterStream}`, 'dead_letter.list and .show'),
    api(`STREAM.MSG.DELETE.${topology.deadLetterStream}`, 'dead_letter.retry removing the record'),
    api(`STREAM.MSG.GET.${events}`, 'dead_letter.show and .retry reading the original event'),
    { operation: 'publish', subject: `$KV.${topology.summaryBucket}.>`, purpose: 'the summary KV bucket' },
    { operation: 'publish', subject: topology.deadLetterSubject, purpose: 'dead letters' },
    { operation: 'publish', subject: topology.agentWaiterSubject('*'), purpose: "clarification responses to an agent's live waiter" },
    { operation: 'publish', subject: topology.agentResumeSubject('*'), purpose: 'resume commands to detached agents' },
    { operation: 'publish', subject: topology.agentPromptSubject('*'), purpose: 'prompts to agents' },
    { operation: 'subscribe', subject: `${inboxPrefix}.>`, purpose: 'replies to its requests (NATS_INBOX_PREFIX)' },
    ...KANDEV_EVENTS_PUBLISHED.map((type): NatsPermissionNeed => ({
      operation: 'publish',
      subject: topology.eventSubject(type),
      purpose: `Kandev's ${type} event`,
      othersSubscribe: true,
    })),
    // dead_letter.retry re-injects an original on its own subject: any subject the worker consumes.
    ...topology.inboundSubjects
      .filter((subject) => !KANDEV_EVENTS_PUBLISHED.some((type) => topology.eventSubject(type) === subject))
      .map((subject): NatsPermissionNeed => ({ operation: 'publish', subject, purpose: 'dead_letter.retry re-injecting an event', othersSubscribe: true })),
  ];
}
