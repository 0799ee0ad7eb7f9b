import { createInbox, errors, headers, type NatsConnection, type QueuedIterator, type Status } from '@nats-io/transport-node';
import { ERROR_CODES, PendingProjectorError } from '../errors.js';

/**
 * One publish or subscribe permission a process needs, as a nats-server permission names it: `*`
 * stands for an id filled in at run time (a session id), `>` for any tail.
 */
export interface NatsPermissionNeed {
  operation: 'publish' | 'subscribe';
  subject: string;
  /** The queue group of a subscription, when it is made in one (the server can permit per queue). */
  queue?: string;
  /** What it is needed for, as the denial message says it. */
  purpose: string;
  /**
   * A publish on a subject others subscribe to (Kandev's events): probed with a no-op envelope
   * rather than an empty message, so its readers skip it as they skip any event they do not handle.
   */
  othersSubscribe?: true;
}

export interface NatsPermissionDenial {
  operation: 'publish' | 'subscribe';
  subject: string;
  queue?: string;
  purpose: string;
}

/** The NATS user lacks permissions a process needs; each denial names the subject and the operation. */
export class NatsPermissionError extends PendingProjectorError {
  override name = 'NatsPermissionError';
  constructor(readonly denials: NatsPermissionDenial[]) {
    super(
      ERROR_CODES.NATS_PERMISSION_DENIED,
      `NATS refuses this user permissions the worker needs:\n${denials.map((d) => `  - ${describeDenial(d)}`).join('\n')}\n` +
        'Grant them to its user (deploy/nats/nats-server.conf, docs/security.md) and start it again.',
    );
  }
}

function describeDenial(d: NatsPermissionDenial): string {
  return `${d.operation} to "${d.subject}"${d.queue ? ` in queue group "${d.queue}"` : ''} (${d.purpose})`;
}

// A token no id takes, so a probe reaches no agent's or task's subscriber; and a stream name no
// stream has, so every stream capturing a probed subject refuses to store it (it must match).
const PROBE_TOKEN = '_permission_probe';
const PROBE_HEADER = 'Pending-Projector-Probe';
/** The type of the probe envelope: no reader handles it, and its data names no task or session. */
export const PERMISSION_PROBE_TYPE = 'pending_projector.permission_probe';

function probeEnvelope(subject: string): Uint8Array {
  const envelope = { id: PROBE_TOKEN, type: PERMISSION_PROBE_TYPE, subject, source: 'pending-projector', timestamp: new Date().toISOString(), data: {} };
  return new TextEncoder().encode(JSON.stringify(envelope));
}

/** The concrete subject a probe uses for a need's subject. */
function probeSubject(subject: string): string {
  return subject
    .split('.')
    .map((token) => (token === '*' || token === '>' ? PROBE_TOKEN : token))
    .join('.');
}

/**
 * Asks the server whether this connection may do what `needs` say, with no effect anyone sees: a
 * publish probe carries no payload and no reply subject, on the need's subject with its wildcards
 * filled by a token no id takes, with a `Nats-Expected-Stream` header no stream matches (a stream
 * capturing the subject refuses to store it); a subscribe probe subscribes and unsubscribes. The
 * server answers a denied one with a permissions violation before it answers the flush, so after
 * the flush every denial has arrived. Resolves to the denials, in the order of `needs`.
 *
 * Most needs are ones whose probe nobody else receives: JetStream API and ack subjects, the KV
 * bucket's, the agents' subjects of a probe session, inboxes. A need marked `othersSubscribe`
 * (Kandev's events) is probed with an envelope of PERMISSION_PROBE_TYPE and empty data: Kandev's
 * readers ignore an event without a task id or of a type they do not handle.
 */
export async function probeNatsPermissions(nc: NatsConnection, needs: readonly NatsPermissionNeed[]): Promise<NatsPermissionDenial[]> {
  const bySubject = new Map<string, NatsPermissionNeed>();
  const refused = new Set<NatsPermissionNeed>();
  const statuses = nc.status() as QueuedIterator<Status>;
  const watching = (async () => {
    for await (const status of statuses) {
      if (status.type !== 'error' || !(status.error instanceof errors.PermissionViolationError)) continue;
      const need = bySubject.get(`${status.error.operation === 'subscription' ? 'subscribe' : 'publish'} ${status.error.subject}`);
      if (need) refused.add(need);
    }
  })();
  const h = headers();
  h.set('Nats-Expected-Stream', PROBE_TOKEN);
  h.set(PROBE_HEADER, 'permission');
  const subs = [];
  for (const need of needs) {
    const subject = need.operation === 'subscribe' && need.subject.endsWith('.>') ? createInbox(need.subject.slice(0, -2)) : probeSubject(need.subject);
    bySubject.set(`${need.operation} ${subject}`, need);
    if (need.operation === 'publish') nc.publish(subject, need.othersSubscribe ? probeEnvelope(subject) : undefined, { headers: h });
    else subs.push(nc.subscribe(subject, need.queue ? { queue: need.queue } : {}));
  }
  await nc.flush();
  for (const sub of subs) sub.unsubscribe();
  // The status iterator hands errors over on later turns of the event loop than the flush's PONG.
  await new Promise((resolve) => setImmediate(resolve));
  statuses.stop();
  await watching;
  return needs
    .filter((need) => refused.has(need))
    .map(({ operation, subject, queue, purpose }) => ({ operation, subject, purpose, ...(queue ? { queue } : {}) }));
}

/** A denial that a subscription already made met (the endpoints' own subscriptions), or undefined. */
export function subscriptionDenial(err: unknown, purpose: string): NatsPermissionDenial | undefined {
  if (!(err instanceof errors.PermissionViolationError) || err.operation !== 'subscription') return undefined;
  return { operation: 'subscribe', subject: err.subject, purpose, ...(err.queue ? { queue: err.queue } : {}) };
}
