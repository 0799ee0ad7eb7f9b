import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import { redactCredentials } from '../redaction.js';
import { natsAuthenticationError, resolveNatsConnection, type NatsClientSettings } from './natsConnectionOptions.js';

/**
 * The one way every command connects to NATS: the servers, credentials and TLS of the settings
 * (natsConnectionOptions), with endless reconnects: a NATS restart must not end the worker.
 * `noAsyncTraces`: by default nats.js builds two Errors (stack captures) for every request and
 * JetStream publish, in case it later times out; they were 11.5% of the worker's CPU profile in the
 * latency benchmark (4% remain: nats.js 3.4 still builds one when each request completes). A
 * timeout still rejects with a TimeoutError; only its stack no longer names our caller, and the
 * worker logs the task with every failure anyway. A server refusing the credentials at connect
 * rejects with a ConfigError (natsAuthenticationError).
 */
export async function connectNats(settings: NatsClientSettings, name: string): Promise<NatsConnection> {
  const { options, identity } = resolveNatsConnection(settings);
  try {
    return await connect({ ...options, name, maxReconnectAttempts: -1, reconnectTimeWait: 500, noAsyncTraces: true });
  } catch (err) {
    // Wrong credentials are the deployment's configuration, not an outage: a ConfigError (exit 2)
    // naming the user and the setting to correct, never the secret.
    if (err instanceof errors.AuthorizationError || err instanceof errors.UserAuthenticationExpiredError) {
      throw natsAuthenticationError(identity, options.servers as string[], redactCredentials(err.message));
    }
    throw err;
  }
}
