import type { NatsConnection, Subscription } from '@nats-io/transport-node';

interface BusEvent {
  subject: string;
  type: string;
  source?: string;
  data: Record<string, unknown>;
}

/** Collects every envelope published on `<prefix><type>` for the given types, in arrival order. */
export function collectEvents(nc: NatsConnection, prefix: string, types: readonly string[]) {
  const events: BusEvent[] = [];
  const subs: Subscription[] = types.map((type) => nc.subscribe(`${prefix}${type}`));
  for (const sub of subs) {
    void (async () => {
      for await (const m of sub) {
        const envelope = m.json<{ type: string; source?: string; data: Record<string, unknown> }>();
        events.push({ subject: m.subject, type: envelope.type, source: envelope.source, data: envelope.data });
      }
    })();
  }
  return {
    events,
    ofType: (type: string) => events.filter((e) => e.type === type),
    about: (field: string, value: unknown) => events.filter((e) => e.data[field] === value),
    stop: () => subs.forEach((s) => s.unsubscribe()),
  };
}
