import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { topologyFor } from '../../src/contract/subjects.js';
import type { ClarificationDeliveryPayload } from '../../src/contract/clarificationPayloads.js';

/** confirm: reply `{ok: true}`; silent: never reply; refuse: reply `{ok: false}`. */
export type FakeAgentMode = 'confirm' | 'silent' | 'refuse';

export interface FakeAgent {
  readonly deliveries: ClarificationDeliveryPayload[];
  mode: FakeAgentMode;
  stop(): void;
}

/**
 * An agent's live clarification waiter for one session, as a real subscriber on
 * `<prefix>agent.<session_id>.clarification`. `onDelivery` runs before the agent answers, so a test
 * can look at the database while the worker waits for the confirmation.
 */
export function startFakeAgent(
  nc: NatsConnection,
  prefix: string,
  sessionId: string,
  options: { mode?: FakeAgentMode; delayMs?: number; onDelivery?: (payload: ClarificationDeliveryPayload) => Promise<void> | void } = {},
): FakeAgent {
  const sub: Subscription = nc.subscribe(topologyFor(prefix).agentWaiterSubject(sessionId));
  const agent: FakeAgent = {
    deliveries: [],
    mode: options.mode ?? 'confirm',
    stop: () => sub.unsubscribe(),
  };
  void (async () => {
    for await (const m of sub) {
      const payload = m.json<ClarificationDeliveryPayload>();
      agent.deliveries.push(payload);
      const mode = agent.mode;
      await options.onDelivery?.(payload);
      if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      if (mode === 'confirm') m.respond(JSON.stringify({ ok: true }));
      else if (mode === 'refuse') m.respond(JSON.stringify({ ok: false, error: 'refused' }));
    }
  })();
  return agent;
}
