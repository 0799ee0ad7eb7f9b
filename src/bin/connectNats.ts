import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Config } from '../config.js';

/** Connects with endless reconnects: a NATS restart must not end the worker. */
export function connectNats(config: Pick<Config, 'natsUrl'>, name: string): Promise<NatsConnection> {
  return connect({ servers: config.natsUrl.split(','), name, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
}
