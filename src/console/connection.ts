import { wsconnect, type NatsConnection } from '@nats-io/nats-core';
import { createPendingProjectorClient, type PendingProjectorClient } from '../client/index.js';
import { byId } from './dom.js';

/** What `/config.json` tells the page (served by `pending-projector console`). */
export interface ConsoleConfig {
  natsUrl: string;
  subjectPrefix: string;
  bucket: string;
}

/** One connection to NATS and what the views call through it. */
export interface ConsoleSession {
  nc: NatsConnection;
  client: PendingProjectorClient;
  config: ConsoleConfig;
}

interface Credentials {
  user: string;
  password: string;
}

// Kept for the tab's life only: a password must not outlive the browser session on disk.
const CREDENTIALS_KEY = 'pending-projector-console.credentials';

function storedCredentials(): Credentials | undefined {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(CREDENTIALS_KEY) ?? 'null') as Credentials | null;
    return parsed && typeof parsed.user === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function storeCredentials(credentials: Credentials): void {
  sessionStorage.setItem(CREDENTIALS_KEY, JSON.stringify(credentials));
}

type ConnectionState = 'connecting' | 'connected' | 'disconnected';

export function showConnectionState(state: ConnectionState, sentence: string): void {
  const element = byId('connection');
  element.dataset.state = state;
  element.textContent = sentence;
}

/** nats.js reports a refused login as an AuthorizationError (or, from some servers, only in its message). */
function isAuthorizationFailure(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return err.name === 'AuthorizationError' || /authorization|authentication/i.test(err.message) || isAuthorizationFailure(err.cause);
}

/**
 * The reply inbox prefix for a user: `_INBOX_<user>` (deploy/nats lets each user subscribe only to
 * its own, so no user reads another's replies), `_INBOX` when connecting without credentials.
 */
export function inboxPrefixOf(user: string | undefined): string {
  const token = (user ?? '').replace(/[^A-Za-z0-9_-]/g, '_');
  return token === '' ? '_INBOX' : `_INBOX_${token}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface ConnectionEvents {
  /** A new connection (first, or after a sign-in or a closed one): the views start on it. */
  connected(session: ConsoleSession): void;
  /** The connection came back after a disconnect: the views resynchronise (the bucket may have been refilled). */
  reconnected(session: ConsoleSession): void;
}

/**
 * Keeps the page connected: connects (with the tab's stored credentials, or none first), shows the
 * login form when the server refuses them, and lets nats.js reconnect by itself forever after a
 * lost connection, saying so in `#connection` meanwhile.
 */
export class ConsoleConnection {
  private current: NatsConnection | undefined;
  private generation = 0;

  constructor(
    private readonly config: ConsoleConfig,
    private readonly events: ConnectionEvents,
  ) {
    const form = byId<HTMLFormElement>('login');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const data = new FormData(form);
      storeCredentials({ user: String(data.get('user') ?? ''), password: String(data.get('password') ?? '') });
      form.hidden = true;
      void this.restart();
    });
    byId('sign-in').addEventListener('click', () => this.showLogin('Sign in to NATS as another user.'));
    byId('login-cancel').addEventListener('click', () => {
      form.hidden = true;
    });
  }

  showLogin(reason: string): void {
    const form = byId<HTMLFormElement>('login');
    byId('login-reason').textContent = reason;
    const stored = storedCredentials();
    if (stored) (form.elements.namedItem('user') as HTMLInputElement).value = stored.user;
    form.hidden = false;
    (form.elements.namedItem(stored ? 'password' : 'user') as HTMLInputElement).focus();
  }

  /** Drops the current connection (if any) and connects again with the stored credentials. */
  async restart(): Promise<void> {
    const generation = ++this.generation;
    const previous = this.current;
    this.current = undefined;
    if (previous) await previous.close().catch(() => undefined);
    await this.connectLoop(generation);
  }

  private async connectLoop(generation: number): Promise<void> {
    const servers = this.config.natsUrl.split(',').map((s) => s.trim());
    for (let attempt = 0; generation === this.generation; attempt++) {
      if (attempt === 0) showConnectionState('connecting', 'Connecting to NATS…');
      else showConnectionState('disconnected', `Disconnected from NATS — reconnecting… (${servers.join(', ')} does not answer)`);
      const credentials = storedCredentials();
      try {
        const nc = await wsconnect({
          servers,
          name: 'pending-projector-console',
          maxReconnectAttempts: -1,
          reconnectTimeWait: 1000,
          ...(credentials ? { user: credentials.user, pass: credentials.password } : {}),
          inboxPrefix: inboxPrefixOf(credentials?.user),
        });
        if (generation !== this.generation) {
          await nc.close();
          return;
        }
        this.current = nc;
        this.watch(nc, generation);
        showConnectionState('connected', `Connected to NATS${credentials ? ` as ${credentials.user}` : ''}`);
        this.events.connected(this.sessionOf(nc));
        return;
      } catch (err) {
        if (isAuthorizationFailure(err)) {
          showConnectionState('disconnected', 'NATS refused the credentials — sign in');
          this.showLogin(credentials ? `NATS refused user ${credentials.user}; check the user and password.` : 'NATS requires a user and password.');
          return;
        }
        await sleep(Math.min(5000, 500 * 2 ** attempt));
      }
    }
  }

  private sessionOf(nc: NatsConnection): ConsoleSession {
    return { nc, config: this.config, client: createPendingProjectorClient(nc, { prefix: this.config.subjectPrefix }) };
  }

  private watch(nc: NatsConnection, generation: number): void {
    void (async () => {
      for await (const status of nc.status()) {
        if (generation !== this.generation) return;
        if (status.type === 'disconnect' || status.type === 'reconnecting') {
          showConnectionState('disconnected', 'Disconnected from NATS — reconnecting…');
        } else if (status.type === 'reconnect') {
          showConnectionState('connected', 'Reconnected to NATS');
          this.events.reconnected(this.sessionOf(nc));
        } else if (status.type === 'error' && isAuthorizationFailure(status.error)) {
          showConnectionState('disconnected', 'NATS refused the credentials — sign in');
          this.showLogin('NATS refused the credentials; sign in again.');
        }
      }
    })();
    void nc.closed().then((err) => {
      if (generation !== this.generation) return;
      if (err && isAuthorizationFailure(err)) {
        showConnectionState('disconnected', 'NATS refused the credentials — sign in');
        this.showLogin('NATS refused the credentials; sign in again.');
        return;
      }
      // Closed for good (nats.js gave up, or the server closed us): start over.
      void this.restart();
    });
  }
}
