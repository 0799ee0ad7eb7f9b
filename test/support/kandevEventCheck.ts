import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { PERMISSION_PROBE_TYPE } from '../../src/events/natsPermissions.js';
import { kandevEventViolation, PUBLISHED_EVENT_SCHEMAS } from './kandevEventSchemas.js';

// Every e2e file's traffic on the shared NATS server is watched: each Kandev event this service
// publishes (source `pending-projector`) must be in Kandev's form, or the file fails. Test
// prefixes come from uniquePrefix(); an unprefixed subject is the type itself.
const TEST_PREFIX = /^t[0-9a-f]{10}_[^.]*\./;

let nc: NatsConnection | undefined;
const subs: Subscription[] = [];
const watching: Promise<void>[] = [];
const violations: string[] = [];
let checked = 0;

function inspect(subject: string, bytes: Uint8Array): void {
  const type = subject.replace(TEST_PREFIX, '');
  let payload: unknown;
  try {
    payload = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return;
  }
  const { source, type: envelopeType } = (payload ?? {}) as { source?: unknown; type?: unknown };
  if (source !== 'pending-projector' || envelopeType === PERMISSION_PROBE_TYPE) return;
  const violation = kandevEventViolation(type, payload);
  if (violation === null) {
    checked += 1;
    return;
  }
  if (violations.length < 20) violations.push(`${subject}: ${violation}`);
}

beforeAll(async () => {
  const url = inject('natsUrl');
  if (!url || !expect.getState().testPath?.includes('/test/e2e/')) return;
  nc = await connect({ servers: url, name: 'pending-projector-tests kandev-event-check' });
  // Only the event subjects: a wildcard over everything would answer requests (an agent waiter
  // with no responder must stay unanswered) and see every reply.
  for (const type of Object.keys(PUBLISHED_EVENT_SCHEMAS)) {
    for (const subject of [type, `*.${type}`]) {
      const sub = nc.subscribe(subject);
      subs.push(sub);
      watching.push(
        (async () => {
          for await (const msg of sub) inspect(msg.subject, msg.data);
        })(),
      );
    }
  }
});

afterAll(async () => {
  if (!nc) return;
  await nc.flush().catch(() => undefined);
  for (const sub of subs.splice(0)) sub.unsubscribe();
  await Promise.all(watching.splice(0));
  await nc.close();
  nc = undefined;
  if (violations.length > 0) throw new Error(`events not in Kandev's form (testdata/kandev-events/, ${checked} others were):\n${violations.join('\n')}`);
});
