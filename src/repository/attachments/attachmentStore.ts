import type { RepositoryContext } from '../context.js';
import { unavailable, type Unavailable } from '../planComments/planCommentOutcomes.js';
import type { PlanCommentSchema } from '../schema/planCommentTables.js';
import { stageAttachment, type StageAttachmentInput, type StageAttachmentResult } from './attachments.js';

export type { AttachmentRecord } from '../planComments/planCommentRows.js';

/** The attachment service's port: staging an attachment's metadata before a prompt claims it. */
export interface AttachmentStore {
  /** Records a staged attachment's metadata, idempotent by id; `unavailable` without the attachments table. */
  stageAttachment(input: StageAttachmentInput): Promise<StageAttachmentResult | Unavailable>;
}

/** The store over `ctx`, for a database whose tables `schema` describes (`detectPlanCommentSchema`). */
export function createAttachmentStore(ctx: RepositoryContext, schema: PlanCommentSchema): AttachmentStore {
  return {
    stageAttachment: (input) =>
      schema.missingForAttachments.length > 0 ? Promise.resolve(unavailable('attachments', schema.missingForAttachments)) : stageAttachment(ctx, input),
  };
}
