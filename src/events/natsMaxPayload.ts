import type { NatsConnection } from '@nats-io/transport-node';
import { busFitProblem } from '../contract/busLimits.js';
import { ERROR_CODES, PendingProjectorError } from '../errors.js';

/** The NATS server's `max_payload` is below the largest message the worker's limits allow (a configuration error: exit 2). */
export class NatsMaxPayloadError extends PendingProjectorError {
  override name = 'NatsMaxPayloadError';
  constructor(message: string) {
    super(ERROR_CODES.NATS_MAX_PAYLOAD_TOO_SMALL, message);
  }
}

/**
 * Refuses a server that cannot carry the worker's largest message (src/contract/busLimits.ts),
 * from the `max_payload` its INFO announced on connect: told at start in one line, instead of a
 * prompt, a collection event or a reply that fails on its way out later.
 */
export function checkNatsMaxPayload(nc: NatsConnection, settings: { maxEventBytes: number; queueMaxPerSession: number }): void {
  const maxPayload = nc.info?.max_payload;
  // No INFO yet cannot happen on a connection connect() returned; nothing to judge then.
  if (maxPayload === undefined) return;
  const problem = busFitProblem({ maxPayload, ...settings });
  if (problem) throw new NatsMaxPayloadError(problem);
}
