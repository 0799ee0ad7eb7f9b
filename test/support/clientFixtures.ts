import { randomUUID } from 'node:crypto';
import type { PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import type { PlanCommentPayload } from '../../src/contract/planCommentPayloads.js';

/** `n` plan comments created through the endpoint, each with a selection and an anchor; any refusal throws. */
export async function createCommentsThrough(
  client: PendingProjectorClient,
  task: { taskId: string; planId: string },
  n: number,
): Promise<PlanCommentPayload[]> {
  const comments: PlanCommentPayload[] = [];
  for (let i = 0; i < n; i++) {
    const reply = await client.createPlanComment({
      task_id: task.taskId,
      plan_id: task.planId,
      comment_id: `c-${randomUUID()}`,
      body: `comment ${i}`,
      selected_text: `line ${i}`,
      anchor_from: i,
      anchor_to: i + 5,
    });
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    comments.push(reply.comment!);
  }
  return comments;
}

/** An attachment staged through the endpoint by a fresh owner: its id and that owner. */
export async function stageThrough(client: PendingProjectorClient, workspaceId: string): Promise<{ id: string; owner: string }> {
  const owner = `user-${randomUUID()}`;
  const staged = await client.stageAttachment({
    id: `att-${randomUUID()}`,
    owner_id: owner,
    workspace_id: workspaceId,
    name: 'a.png',
    mime_type: 'image/png',
    size_bytes: 10,
    storage_key: `key-${randomUUID()}`,
  });
  if (!staged.ok) throw new Error(JSON.stringify(staged));
  return { id: staged.attachment.id, owner };
}
