import { rawRows, type RepositoryContext } from '../context.js';

/**
 * Allocates the session's next prompt sequence number (Kandev's `task_session_prompt_seq`), under the
 * session's turn-write lock. A missing counter starts after the highest `prompt_seq` the session's
 * messages already carry.
 */
export async function nextPromptSeq(tx: RepositoryContext, sessionId: string): Promise<number> {
  const rows = await rawRows<{ last_seq: number | string }>(
    tx,
    `INSERT INTO task_session_prompt_seq (task_session_id, last_seq)
     VALUES (?, (SELECT COALESCE(MAX(m.prompt_seq), 0) + 1 FROM task_session_messages m WHERE m.task_session_id = ?))
     ON CONFLICT (task_session_id) DO UPDATE SET last_seq = task_session_prompt_seq.last_seq + 1
     RETURNING last_seq`,
    [sessionId, sessionId],
  );
  return Number(rows[0]!.last_seq);
}
