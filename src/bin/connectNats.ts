import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import { redactCredentials } from '../redaction.js';
import { ConnectionFailedError, natsConnectionFailure } from './connectionFailure.js';
import { resolveNatsConnection, type NatsClientSettings } from './natsConnectionOptions.js';

/** NATS settings that validated, and the one way to connect with them. */
export interface PreparedNats {
  /** NATS_URL as given, credentials masked: the address every failure names. */
  readonly address: string;
  connect(name: string): Promise<NatsConnection>;
}

/**
 * Validates the NATS settings (servers, credentials, TLS files; a ConfigError lists every problem)
 * without connecting, so a command can check all its settings before it opens any connection.
 */
export function prepareNats(settings: NatsClientSettings): PreparedNats {
  const { options, identity } = resolveNatsConnection(settings);
  const address = redactCredentials(settings.natsUrl);
  return {
    address,
    async connect(name) {
      try {
        return await connect({ ...options, name, maxReconnectAttempts: -1, reconnectTimeWait: 500, noAsyncTraces: true });
      } catch (err) {
        // Wrong credentials are the deployment's configuration, not an outage: exit 2, naming the
        // user and the setting to correct, never the secret.
        if (err instanceof errors.AuthorizationError || err instanceof errors.UserAuthenticationExpiredError) {
          throw new ConnectionFailedError(
            'credentials',
            { service: 'NATS', setting: 'NATS_URL / --nats-url', address },
            `refused ${identity.who}: ${redactCredentials(err.message)}`,
            `To fix it, ${identity.fix}, then start again`,
            {
              cause: err,
            },
          );
        }
        throw natsConnectionFailure(err, address, redactCredentials);
      }
    },
  };
}

/**
 * The one way every command connects to NATS: the servers, credentials and TLS of the settings
 * (natsConnectionOptions), with endless reconnects: a NATS restart must not end the worker.
 * `noAsyncTraces`: by default nats.js builds two Errors (stack captures) for every request and
 * JetStream publish, in case it later times out; they were 11.5% of the worker's CPU profile in the
 * latency benchmark (4% remain: nats.js 3.4 still builds one when each request completes). A
 * timeout still rejects with a TimeoutError; only its stack no longer names our caller, and the
 * worker logs the task with every failure anyway. A connect that fails rejects with a
 * ConnectionFailedError: one line naming NATS_URL, the address, the reason and what to check.
 */
export async function connectNats(settings: NatsClientSettings, name: string): Promise<NatsConnection> {
  return prepareNats(settings).connect(name);
}
