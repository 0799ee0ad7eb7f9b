import { rawRows, storedNow, beginOrJoin, type RepositoryContext } from '../context.js';
import { toMessageRecord, type MessageRecord } from '../rowMapping.js';

/**
 * A claim whose delivery failed (or whose worker died) and that can no longer be restored, because
 * its turn was superseded or its session became terminal: the rows keep their terminal status (as
 * Kandev's crash recovery does) but lose the `response_delivery_pending` marker, and are flagged
 * `response_undelivered: true` so a retried response is never answered with an outcome the agent
 * never received. Only rows still carrying the marker change; returns them.
 */
export function abandonClaimedClarifications(ctx: RepositoryContext, messageIds: readonly string[]): Promise<MessageRecord[]> {
  return beginOrJoin(ctx, async (tx) => {
    if (messageIds.length === 0) return [];
    const d = tx.dialect;
    const patch = d.jsonPatch('metadata', { response_undelivered: true }, ['response_delivery_pending']);
    const members = d.inList('m.id', messageIds);
    const rows = await rawRows<Record<string, unknown>>(
      tx,
      `UPDATE task_session_messages AS m SET metadata = ${patch.sql}, updated_at = ?
        WHERE ${members.sql} AND ${d.jsonFlag('m.metadata', 'response_delivery_pending')} RETURNING *`,
      [...patch.bindings, storedNow(tx), ...members.bindings],
    );
    return rows.map(toMessageRecord);
  });
}
