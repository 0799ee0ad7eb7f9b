import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from './freePort.js';
import { startPrivateNats, type PrivateNats } from './privateNats.js';

/**
 * deploy/nats as shipped, started as a private server: the roles' permissions under test are the
 * ones operators install. Only the machine-specific lines change: the JetStream store, and the
 * WebSocket listener's port (a free one, so parallel test files never meet on 8080).
 */

const SHIPPED_CONFIG = readFileSync(fileURLToPath(new URL('../../deploy/nats/nats-server.conf', import.meta.url)), 'utf8');
const SHIPPED_ACCOUNTS = readFileSync(fileURLToPath(new URL('../../deploy/nats/pending-projector-accounts.conf', import.meta.url)), 'utf8');
const SHIPPED_STORE = 'store_dir: "/var/lib/nats-server"';
const SHIPPED_WEBSOCKET = 'listen: "127.0.0.1:8080"';

const SHIPPED_ROLES = ['worker', 'backend', 'ui', 'agent', 'ops'] as const;
export type ShippedRole = (typeof SHIPPED_ROLES)[number];

/** A fresh password per role; a leading letter keeps nats-server reading the variable as a string. */
export function rolePasswords(): Record<ShippedRole, string> {
  return Object.fromEntries(SHIPPED_ROLES.map((role) => [role, `pw${randomBytes(12).toString('hex')}`])) as Record<ShippedRole, string>;
}

/** deploy/nats/nats-server.conf with its store at `storeDir` and its WebSocket listener on 127.0.0.1:`websocketPort`. */
export function shippedNatsConfig(storeDir: string, websocketPort: number): string {
  if (!SHIPPED_CONFIG.includes(SHIPPED_STORE) || !SHIPPED_CONFIG.includes(SHIPPED_WEBSOCKET))
    throw new Error(`deploy/nats/nats-server.conf no longer holds ${SHIPPED_STORE} and ${SHIPPED_WEBSOCKET}: update test/support/shippedNats.ts`);
  return SHIPPED_CONFIG.replace(SHIPPED_STORE, `store_dir: ${JSON.stringify(storeDir)}`).replace(
    SHIPPED_WEBSOCKET,
    `listen: ${JSON.stringify(`127.0.0.1:${websocketPort}`)}`,
  );
}

export interface ShippedNats extends PrivateNats {
  /** `ws://127.0.0.1:<port>`, the shipped WebSocket listener. */
  readonly websocketUrl: string;
}

/** The shipped configuration and accounts on free loopback ports, each role's password in the server's environment. */
export async function startShippedNats(passwords: Record<ShippedRole, string>): Promise<ShippedNats> {
  const websocketPort = await freePort();
  const env = Object.fromEntries(SHIPPED_ROLES.map((role) => [`${role.toUpperCase()}_PASSWORD`, passwords[role]]));
  const server = await startPrivateNats((storeDir) => shippedNatsConfig(storeDir, websocketPort), env, {
    files: { 'pending-projector-accounts.conf': SHIPPED_ACCOUNTS },
  });
  return Object.assign(server, { websocketUrl: `ws://127.0.0.1:${websocketPort}` });
}
