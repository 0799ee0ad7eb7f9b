import type { z } from 'zod';
import type { EndpointReplyOf } from '../../contract/endpoints.js';
import type { AttachmentStore } from '../../repository/attachments/attachmentStore.js';
import type { attachmentStageSchema } from '../../contract/planCommentRequests.js';
import { attachmentPayload, storeFailure } from '../planCommentWire.js';

/** `attachment.stage`: records an attachment's metadata, idempotent by id, for a later prompt to claim. */
export interface AttachmentService {
  stageAttachment(request: z.output<typeof attachmentStageSchema>): Promise<EndpointReplyOf<'stageAttachment'>>;
}

export function createAttachmentService(deps: { store: AttachmentStore }): AttachmentService {
  return {
    async stageAttachment(r) {
      const staged = await deps.store.stageAttachment({
        id: r.id,
        ownerId: r.owner_id,
        workspaceId: r.workspace_id,
        taskId: r.task_id,
        sessionId: r.session_id,
        name: r.name,
        mimeType: r.mime_type,
        sizeBytes: r.size_bytes,
        storageKey: r.storage_key,
        kind: r.kind,
        deliveryMode: r.delivery_mode,
        ttlMs: r.ttl_ms,
      });
      if (!staged.ok) return storeFailure(staged);
      return { ok: true, replayed: staged.replayed, attachment: attachmentPayload(staged.attachment) };
    },
  };
}
