import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { periodic } from '../../background/periodic.js';
import type { Topology } from '../../contract/subjects.js';
import type { Metrics } from '../../metrics.js';
import type { WorkerComponent } from './component.js';

export interface ConsumerLagProbeDeps {
  jsm: JetStreamManager;
  topology: Topology;
  metrics: Metrics;
  logger: Logger;
  intervalMs?: number;
}

/** Reads the durable consumer's pending and ack-pending counts every few seconds into the metrics. */
export function consumerLagProbe(deps: ConsumerLagProbeDeps): WorkerComponent & { readonly lag: number } {
  let lag = 0;
  const loop = periodic({
    intervalMs: deps.intervalMs ?? 5000,
    firstRun: 'after-interval',
    logger: deps.logger.child({ component: 'consumer-lag-probe' }),
    failureMessage: 'could not read consumer info',
    failureLevel: 'warn',
    run: async () => {
      const info = await deps.jsm.consumers.info(deps.topology.eventsStream, deps.topology.consumer);
      lag = info.num_pending;
      deps.metrics.consumerLag.set(info.num_pending);
      deps.metrics.ackPending.set(info.num_ack_pending);
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
