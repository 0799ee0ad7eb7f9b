import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, type Consumer, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { backoffDelayMs, type Backoff } from '../background/backoff.js';
import { classifyFailure, coerceError, poisonCause } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { EventData } from '../contract/envelope.js';
import { parseEvent } from './parseEvent.js';
import { previewOf, writeDeadLetter, type DeadLetterRecord } from './deadLetters.js';
import { eventTypeOf, type Topology } from '../contract/subjects.js';
import { partitionOf } from '../contract/eventPartitions.js';

/** How an event reached this replica: `redelivered` when an earlier delivery was never acknowledged. */
export interface EventDelivery {
  redelivered: boolean;
}

/** What the consumer hands each valid event to (the projector). */
interface EventHandler {
  handleEvent(eventType: string, data: EventData, delivery: EventDelivery): Promise<string>;
}

export interface EventConsumerOptions {
  nc: NatsConnection;
  topology: Topology;
  handler: EventHandler;
  logger: Logger;
  metrics?: Metrics;
  maxEventBytes: number;
  maxDeliver: number;
  /** Unacknowledged events held at once (they wait for coalesced projections). */
  maxInFlight?: number;
  /** The durable consumer pulled (default: the one every replica shares). */
  consumerName?: string;
  /** Set when `consumerName` is one partition's: the events of other partitions are acked unhandled. */
  partition?: PartitionFilter;
}

/** Which events a partition's consumer handles (src/contract/eventPartitions.ts has the rule). */
export interface PartitionFilter {
  index: number;
  count: number;
  /** The task of a session, for events that name only their session; undefined when unknown. */
  taskOfSession(sessionId: string): Promise<string | undefined>;
}

/** Nak delays: 250 ms after the first delivery, doubling, at most 30 s. */
const NAK_BACKOFF: Backoff = { minTimeout: 250, factor: 2, maxTimeout: 30_000 };

/** Nak delay growing with the delivery count: a database blip must not burn max_deliver in milliseconds. */
export function retryDelayMs(deliveryCount: number): number {
  return backoffDelayMs(NAK_BACKOFF, deliveryCount - 1);
}

/**
 * Pulls the durable consumer shared by every replica and settles each event exactly once:
 * ack after the covering projection committed and published; nak with a growing delay on a
 * transient failure; a dead-letter record then `term()` for bad input or the last allowed delivery.
 */
export class EventConsumer {
  private messages: ConsumerMessages | undefined;
  private loop: Promise<void> | undefined;
  private inFlight = 0;
  private slotWaiters: Array<() => void> = [];
  private stopping = false;
  private lastProgressAt = Date.now();
  private acks: Array<{ m: JsMsg; sent: () => void; failed: (err: unknown) => void }> = [];
  private acksScheduled = false;
  private readonly log: Logger;

  constructor(private readonly options: EventConsumerOptions) {
    this.log = options.logger.child({ component: 'event-consumer' });
  }

  /** Milliseconds since an event was last settled. */
  get idleForMs(): number {
    return Date.now() - this.lastProgressAt;
  }

  get unsettled(): number {
    return this.inFlight;
  }

  async start(): Promise<void> {
    const name = this.options.consumerName ?? this.options.topology.consumer;
    const consumer: Consumer = await jetstream(this.options.nc).consumers.get(this.options.topology.eventsStream, name);
    this.messages = await consumer.consume({ max_messages: 256 });
    this.loop = this.run(this.messages);
  }

  /** Stops pulling and waits until every event already taken is settled. Idempotent. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.messages?.close().catch(() => undefined);
    await this.loop;
    while (this.inFlight > 0) await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    const maxInFlight = this.options.maxInFlight ?? 2048;
    for await (const m of messages) {
      if (this.stopping) {
        // Taken from the buffer after stop: hand it back at once for another replica.
        m.nak();
        continue;
      }
      while (this.inFlight >= maxInFlight) await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
      this.inFlight++;
      void this.settle(m).finally(() => {
        this.inFlight--;
        this.lastProgressAt = Date.now();
        const waiters = this.slotWaiters;
        this.slotWaiters = [];
        for (const resolve of waiters) resolve();
      });
    }
  }

  private async settle(m: JsMsg): Promise<void> {
    const { metrics, topology } = this.options;
    const context = { subject: m.subject, streamSeq: m.info.streamSequence, deliveryCount: m.info.deliveryCount };
    // Bad input is known here, before any SQL: dead-lettered on this delivery, never retried.
    const parsed = parseEvent(m.data, this.options.maxEventBytes);
    if (!parsed.ok && this.options.partition && this.options.partition.index !== 0) {
      // Every partition's consumer reads every event; bad input names no task, so partition 0 alone records it.
      await this.ack(m);
      metrics?.events.inc({ outcome: 'other_partition' });
      return;
    }
    if (!parsed.ok) {
      this.log.warn({ ...context, reason: parsed.reason, detail: parsed.detail.slice(0, 500) }, 'event rejected: dead-lettered');
      await this.deadLetter(m, parsed.reason, parsed.detail);
      return;
    }
    try {
      if (this.options.partition && !(await this.isMine(this.options.partition, parsed.data))) {
        await this.ack(m);
        metrics?.events.inc({ outcome: 'other_partition' });
        return;
      }
      const delivery = { redelivered: m.info.deliveryCount > 1 };
      const outcome = await this.options.handler.handleEvent(eventTypeOf(m.subject, topology.prefix), parsed.data, delivery);
      await this.ack(m);
      metrics?.events.inc({ outcome });
      this.log.debug({ ...context, taskId: parsed.data.task_id, outcome }, 'event settled');
    } catch (raw) {
      const error = coerceError(raw);
      const failure = classifyFailure(error);
      const lastDelivery = m.info.deliveryCount >= this.options.maxDeliver;
      if (failure === 'poison' || lastDelivery) {
        this.log.warn({ ...context, err: error, failure }, 'event failed for good: dead-lettered');
        await this.deadLetter(m, failure === 'poison' ? (poisonCause(error)?.reason ?? 'poison') : 'retries_exhausted', `${error.name}: ${error.message}`);
        return;
      }
      const delay = retryDelayMs(m.info.deliveryCount);
      this.log.warn({ ...context, err: error, failure, retryInMs: delay }, 'event failed; will retry');
      metrics?.events.inc({ outcome: 'retried' });
      m.nak(delay);
    }
  }

  /**
   * Whether this partition handles the event: by its task, or, for an event naming only its session,
   * by the session's task (one read, which the projection would make anyway). An event naming
   * neither goes to partition 0, so exactly one partition settles it.
   */
  private async isMine(partition: PartitionFilter, data: EventData): Promise<boolean> {
    const taskId = data.task_id ?? (data.session_id ? await partition.taskOfSession(data.session_id) : undefined);
    return (taskId === undefined ? 0 : partitionOf(taskId, partition.count)) === partition.index;
  }

  /**
   * Acks once per event-loop turn, all together: nats.js writes its buffer to the socket on the next
   * microtask, so acks issued one by one cost one socket write each, the dominant cost of cheap
   * events. Still strictly after the covering projection committed; resolves once the ack is
   * handed to the connection, so `stop()` (which waits for settled events) never drains before it.
   */
  private ack(m: JsMsg): Promise<void> {
    return new Promise((sent, failed) => {
      this.acks.push({ m, sent, failed });
      if (this.acksScheduled) return;
      this.acksScheduled = true;
      setImmediate(() => {
        const batch = this.acks;
        this.acks = [];
        this.acksScheduled = false;
        for (const ack of batch) {
          try {
            ack.m.ack();
            ack.sent();
          } catch (err) {
            ack.failed(err);
          }
        }
      });
    });
  }

  private async deadLetter(m: JsMsg, reason: string, detail: string): Promise<void> {
    const record: DeadLetterRecord = {
      kind: 'rejected',
      reason,
      detail: detail.slice(0, 4000),
      subject: m.subject,
      stream_seq: m.info.streamSequence,
      delivery_count: m.info.deliveryCount,
      dead_lettered_at: new Date().toISOString(),
      payload_bytes: m.data.byteLength,
      payload_preview: previewOf(m.data),
    };
    try {
      await writeDeadLetter(this.options.nc, this.options.topology, record);
    } catch (err) {
      // Without a record the event would vanish: keep it and try again later.
      this.log.error({ streamSeq: record.stream_seq, err }, 'could not write dead-letter record; will retry');
      m.nak(retryDelayMs(m.info.deliveryCount));
      return;
    }
    this.options.metrics?.deadLetters.inc({ reason });
    this.options.metrics?.events.inc({ outcome: 'dead_lettered' });
    // No reason argument: nats-server 2.9 does not understand term("reason") and would redeliver.
    m.term();
  }
}
