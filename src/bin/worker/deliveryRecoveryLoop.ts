import type { Logger } from 'pino';
import type { WorkerComponent } from './component.js';

export interface DeliveryRecoveryLoopDeps {
  /** One recovery pass over claims at least `minClaimAgeMs` old (the clarification service's). */
  recover(options: { minClaimAgeMs: number }): Promise<{ deferred: number }>;
  /** Age a claim must reach before it is recovered, and the wait before the next pass. */
  graceMs: number;
  logger: Logger;
}

/**
 * Recovers the clarification claims a crashed process left between claim and delivery (domain
 * reference §7.5): one pass at start, before the endpoints serve, then another after the grace
 * window for as long as a pass failed or deferred a claim. Younger claims may still be in delivery
 * on another replica, and a claim whose resume cannot be checked (bus down) must not be guessed at:
 * both get another look, until none is left.
 */
export function deliveryRecoveryLoop(deps: DeliveryRecoveryLoopDeps): WorkerComponent {
  const log = deps.logger.child({ component: 'delivery-recovery' });
  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const runPass = async (): Promise<void> => {
    const run = deps.recover({ minClaimAgeMs: deps.graceMs }).catch((err: Error) => {
      log.error({ err }, 'clarification delivery recovery failed');
      return undefined;
    });
    pass = run;
    const report = await run;
    if (!stopped && (report === undefined || report.deferred > 0)) {
      timer = setTimeout(() => void runPass(), deps.graceMs);
      timer.unref();
    }
  };
  return {
    name: 'delivery-recovery',
    start: runPass,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await pass;
    },
  };
}
