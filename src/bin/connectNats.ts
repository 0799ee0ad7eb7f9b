import { connect, type NatsConnection } from '@nats-io/transport-node';
import { natsConnectionOptions, type NatsClientSettings } from './natsConnectionOptions.js';

/**
 * The one way every command connects to NATS: the servers, credentials and TLS of the settings
 * (natsConnectionOptions), with endless reconnects: a NATS restart must not end the worker.
 * `noAsyncTraces`: by default nats.js builds two Errors (stack captures) for every request and
 * JetStream publish, in case it later times out; they were 11.5% of the worker's CPU profile in the
 * latency benchmark (4% remain: nats.js 3.4 still builds one when each request completes). A
 * timeout still rejects with a TimeoutError; only its stack no longer names our caller, and the
 * worker logs the task with every failure anyway.
 */
export function connectNats(settings: NatsClientSettings, name: string): Promise<NatsConnection> {
  return connect({ ...natsConnectionOptions(settings), name, maxReconnectAttempts: -1, reconnectTimeWait: 500, noAsyncTraces: true });
}
