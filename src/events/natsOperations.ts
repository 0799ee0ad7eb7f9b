import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Topology } from '../contract/subjects.js';
import type { OperationsBus } from '../services/operations/operationsService.js';
import { listDeadLetters, retryDeadLetter, showDeadLetter, type DeadLetterEntry } from './deadLetters.js';

const payloadOf = ({ id, record }: DeadLetterEntry) => ({ seq: id, ...record });

/**
 * The operations endpoints' view of the bus: the dead-letter stream and the worker's consumer. With
 * EVENT_PARTITIONS, `consumers` lists the partitions' and the stats are the most lagging one's (each
 * sees the whole stream); the shared consumer is not pulled then.
 */
export function natsOperationsBus(
  nc: NatsConnection,
  jsm: JetStreamManager,
  topology: Topology,
  consumers: readonly string[] = [topology.consumer],
): OperationsBus {
  return {
    listDeadLetters: async (limit) => (await listDeadLetters(jsm, topology, limit)).map(payloadOf),
    async showDeadLetter(id) {
      const detail = await showDeadLetter(jsm, topology, id);
      return detail ? { dead_letter: payloadOf(detail), original: detail.original } : null;
    },
    retryDeadLetter: (id) => retryDeadLetter(nc, topology, id),
    async consumerStats() {
      const [infos, events, deadLetters] = await Promise.all([
        Promise.all(consumers.map((name) => jsm.consumers.info(topology.eventsStream, name))),
        jsm.streams.info(topology.eventsStream),
        jsm.streams.info(topology.deadLetterStream),
      ]);
      const consumer = infos.reduce((most, info) => (info.num_pending > most.num_pending ? info : most));
      return {
        stream: topology.eventsStream,
        consumer: consumer.name,
        num_pending: consumer.num_pending,
        num_ack_pending: consumer.num_ack_pending,
        num_redelivered: consumer.num_redelivered,
        stream_messages: events.state.messages,
        stream_bytes: events.state.bytes,
        dead_letters: deadLetters.state.messages,
      };
    },
  };
}
