import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
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
  const log = deps.logger.child({ component: 'consumer-lag-probe' });
  let lag = 0;
  let timer: NodeJS.Timeout | undefined;
  const probe = () => {
    deps.jsm.consumers
      .info(deps.topology.eventsStream, deps.topology.consumer)
      .then((info) => {
        lag = info.num_pending;
        deps.metrics.consumerLag.set(info.num_pending);
        deps.metrics.ackPending.set(info.num_ack_pending);
      })
      .catch((err: Error) => log.warn({ err: err.message }, 'could not read consumer info'));
  };
  return {
    name: 'consumer-lag-probe',
    /** Events not yet delivered to the consumer at the last reading. */
    get lag() {
      return lag;
    },
    async start() {
      timer = setInterval(probe, deps.intervalMs ?? 5000);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
    },
  };
}
