import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { Clock } from '../timestamps.js';
import type { EventPublisher } from '../services/clarifications/clarificationPorts.js';
import { createEnvelope } from '../contract/envelope.js';
import type { KandevEvent } from '../contract/kandevEvents.js';
import type { Topology } from '../contract/subjects.js';

const encoder = new TextEncoder();

/**
 * Publishes Kandev events as the standard envelope on `<prefix><type>`, with the event's `msgId` as
 * its `Nats-Msg-Id` when it has one. A JetStream publish, so it resolves only once the worker's
 * events stream holds the event (which then triggers the reprojection); plain subscribers of the
 * subject receive it like any core message.
 */
export class NatsEventPublisher implements EventPublisher {
  private readonly js: JetStreamClient;

  constructor(
    nc: NatsConnection,
    private readonly topology: Topology,
    private readonly clock: Clock,
    timeoutMs = 5000,
  ) {
    this.js = jetstream(nc, { timeout: timeoutMs });
  }

  async publish(events: readonly KandevEvent[]): Promise<void> {
    await Promise.all(
      events.map((event) => {
        const subject = this.topology.eventSubject(event.type);
        const envelope = createEnvelope(event.type, subject, { ...event.data }, event.msgId ?? randomUUID(), this.clock());
        return this.js.publish(subject, encoder.encode(JSON.stringify(envelope)), event.msgId !== undefined ? { msgID: event.msgId } : undefined);
      }),
    );
  }
}
