import { rawRows, type RepositoryContext } from '../context.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';

export const PENDING_ACTION_EPOCH_KEY = 'pending_action_projection_epoch';

export class CorruptMetaError extends PendingProjectorError {
  override name = 'CorruptMetaError';
  constructor(message: string) {
    super(ERROR_CODES.META_CORRUPT, message);
  }
}

/**
 * Allocates the next pending-action projection epoch (one per process boot), as Kandev does: insert
 * "1", or increment a stored canonical positive integer. A non-canonical stored value matches
 * nothing and raises, instead of silently resetting the epoch and letting clients keep stale values.
 */
export async function nextPendingActionProjectionEpoch(ctx: RepositoryContext): Promise<string> {
  const current = ctx.dialect.isCanonicalPositiveInteger('kandev_meta.value');
  const increment = ctx.dialect.incrementIntegerText('kandev_meta.value');
  const rows = await rawRows<{ value: string }>(
    ctx,
    `INSERT INTO kandev_meta (key, value) VALUES (?, '1')
     ON CONFLICT (key) DO UPDATE SET value = ${increment} WHERE ${current}
     RETURNING value`,
    [PENDING_ACTION_EPOCH_KEY],
  );
  const value = rows[0]?.value;
  if (value === undefined) throw new CorruptMetaError(`kandev_meta.${PENDING_ACTION_EPOCH_KEY} holds a non-canonical value; refusing to reset it`);
  return String(value);
}
