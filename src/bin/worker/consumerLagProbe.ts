import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { periodic } from '../../background/periodic.js';
import type { Topology } from '../../contract/subjects.js';
import type { Metrics } from '../../metrics.js';
import type { WorkerComponent } from './component.js';

export interface ConsumerLagProbeDeps {
  jsm: JetStreamManager;
  topology: Topology;
  /** The durable consumers the replicas pull (eventConsumers). */
  consumers: readonly string[];
  metrics: Metrics;
  logger: Logger;
  intervalMs?: number;
}

/**
 * Reads the durable consumers' pending and ack-pending counts every few seconds into the metrics:
 * the lag is the largest pending count (each partition's consumer sees the whole stream), the
 * ack-pending count their sum.
 */
export function consumerLagProbe(deps: ConsumerLagProbeDeps): WorkerComponent & { readonly lag: number } {
  let lag = 0;
  const loop = periodic({
    intervalMs: deps.intervalMs ?? 5000,
    firstRun: 'after-interval',
    logger: deps.logger.child({ component: 'consumer-lag-probe' }),
    failureMessage: 'could not read consumer info',
    failureLevel: 'warn',
    run: async () => {
      const infos = await Promise.all(deps.consumers.map((name) => deps.jsm.consumers.info(deps.topology.eventsStream, name)));
      lag = Math.max(...infos.map((info) => info.num_pending));
      deps.metrics.consumerLag.set(lag);
      deps.metrics.ackPending.set(infos.reduce((sum, info) => sum + info.num_ack_pending, 0));
    },
  });
  return {
    name: 'consumer-lag-probe',
    /** Events not yet delivered to the consumer at the last reading. */
    get lag() {
      return lag;
    },
    start: () => loop.start(),
    stop: () => loop.stop(),
  };
}
