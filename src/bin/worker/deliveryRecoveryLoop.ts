import type { Logger } from 'pino';
import { periodic } from '../../background/periodic.js';
import type { WorkerComponent } from './component.js';

export interface DeliveryRecoveryLoopDeps {
  /** One recovery pass over claims at least `minClaimAgeMs` old (the clarification service's). */
  recover(options: { minClaimAgeMs: number }): Promise<{ deferred: number }>;
  /** Age a claim must reach before it is recovered, and the wait before the next pass. */
  graceMs: number;
  logger: Logger;
}

/**
 * Recovers the clarification claims a crashed process left between claim and delivery: one pass at
 * start, before the endpoints serve, then another after the grace window for as long as a pass
 * failed or deferred a claim. Younger claims may still be in delivery on another replica, and a
 * claim whose resume cannot be checked (bus down) must not be guessed at: both get another look,
 * until none is left.
 */
export function deliveryRecoveryLoop(deps: DeliveryRecoveryLoopDeps): WorkerComponent {
  const loop = periodic({
    intervalMs: deps.graceMs,
    firstRun: 'at-start',
    logger: deps.logger.child({ component: 'delivery-recovery' }),
    failureMessage: 'clarification delivery recovery failed',
    run: async () => {
      const report = await deps.recover({ minClaimAgeMs: deps.graceMs });
      return report.deferred > 0 ? undefined : 'done';
    },
  });
  return { name: 'delivery-recovery', start: () => loop.start(), stop: () => loop.stop() };
}
