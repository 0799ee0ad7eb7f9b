import { rawRows, type RepositoryContext } from '../context.js';
import { instantAfter } from '../../timestamps.js';

/**
 * Acquires or renews the named lease for `owner` until now + ttlMs. True when `owner` holds it:
 * it was free, expired, or already ours. One statement, so two replicas cannot both win.
 */
export async function acquireLease(ctx: RepositoryContext, name: string, owner: string, ttlMs: number): Promise<boolean> {
  const now = ctx.clock();
  const expiresAt = instantAfter(now, ttlMs);
  const rows = await rawRows(
    ctx,
    `INSERT INTO pending_projector_leases (name, owner, expires_at) VALUES (?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
     WHERE pending_projector_leases.owner = excluded.owner OR pending_projector_leases.expires_at < ?
     RETURNING name`,
    [name, owner, expiresAt, now],
  );
  return rows.length > 0;
}

export async function releaseLease(ctx: RepositoryContext, name: string, owner: string): Promise<void> {
  await ctx.knex('pending_projector_leases').where({ name, owner }).del();
}

/** Every unexpired lease whose name starts with `prefix`: its name and holder. */
export async function listLiveLeases(ctx: RepositoryContext, prefix: string): Promise<Array<{ name: string; owner: string }>> {
  const rows = (await ctx.knex('pending_projector_leases').select('name', 'owner').where('expires_at', '>=', ctx.clock())) as Array<{
    name: string;
    owner: string;
  }>;
  return rows.filter((row) => row.name.startsWith(prefix));
}
