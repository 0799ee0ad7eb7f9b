import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { SeededRandom } from './seededRandom.js';

/**
 * The soak's stand-in for Kandev's backend on the bus: every change it commits is announced with a
 * Kandev envelope on `<prefix><type>`, through JetStream and retried until the server acknowledges
 * it (so a nats-server restart delays an event, never drops it). Two faults live here, as a
 * misbehaving backend or a redelivering bus produces them:
 *
 * - reordered: an event is held back and published after the next one;
 * - duplicate: an envelope published before is published again, same id, later than newer events.
 *
 * Neither may change a summary: events only say "this task may be stale".
 */
export interface BackendEvents {
  announce(type: string, data: Record<string, unknown>): Promise<void>;
  /** Publishes what is held back; the soak calls it before it waits for quiescence. */
  flush(): Promise<void>;
  readonly counts: { events: number; duplicates: number; reordered: number };
}

const RECENT = 64;

export function createBackendEvents(
  nc: NatsConnection,
  prefix: string,
  random: SeededRandom,
  options: { duplicateRate: number; reorderRate: number },
): BackendEvents {
  const js = jetstream(nc, { timeout: 3000 });
  const recent: Array<{ subject: string; body: Uint8Array }> = [];
  let held: { subject: string; body: Uint8Array } | undefined;
  const counts = { events: 0, duplicates: 0, reordered: 0 };

  const publish = async (subject: string, body: Uint8Array) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await js.publish(subject, body);
        counts.events++;
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };

  return {
    counts,
    async announce(type, data) {
      const subject = `${prefix}${type}`;
      const body = new TextEncoder().encode(
        JSON.stringify({ id: randomUUID(), type, subject: type, source: 'soak-backend', timestamp: new Date().toISOString(), data }),
      );
      if (!held && random.chance(options.reorderRate)) {
        held = { subject, body };
        counts.reordered++;
        return;
      }
      await publish(subject, body);
      if (held) {
        const late = held;
        held = undefined;
        await publish(late.subject, late.body);
      }
      recent.push({ subject, body });
      if (recent.length > RECENT) recent.shift();
      if (random.chance(options.duplicateRate)) {
        const again = random.pick(recent);
        counts.duplicates++;
        await publish(again.subject, again.body);
      }
    },
    async flush() {
      if (!held) return;
      const late = held;
      held = undefined;
      await publish(late.subject, late.body);
    },
  };
}
