import { z } from 'zod';
import { idSchema, storableTextSchema } from '../storableText.js';
import { PLAN_COMMENT_LIMITS, utf8Length } from '../turns/planCommentPrompt.js';

/**
 * Request bodies of the plan-comment, message and attachment endpoints (docs/endpoints.md). Every
 * body is `.strict()`: an unknown field is `bad_request`, which is what makes a `session_id` in
 * Run's body a refusal (Run addresses the task's primary session, never a selected tab). Every
 * string is storable text (src/storableText.ts): those that are not ids still reach SQL.
 */

/**
 * A caller id: the client's id for one prompt, reused on a retry (it becomes the message id and the
 * receipt id, keys the admission lock `message:<caller id>`, and goes into the prompt's
 * `Nats-Msg-Id` and headers). ASCII letters, digits and `. _ : -` only, 1 to 128 characters (design
 * §4): no spaces, no `>` or `*`, nothing a subject, a header, a log line or a lock key could misread.
 */
export const CALLER_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
export const callerIdSchema = z.string().regex(CALLER_ID_PATTERN, { message: 'caller_id must be 1 to 128 of A-Z a-z 0-9 . _ : - (no spaces, no wildcards)' });

// Kandev's limits count UTF-8 bytes; a body counts after trimming.
const { bodyMaxBytes, selectedTextMaxBytes, promptMaxBytes } = PLAN_COMMENT_LIMITS;
const body = storableTextSchema.refine((s) => s.trim().length > 0 && utf8Length(s.trim()) <= bodyMaxBytes, {
  message: `body must hold 1 to ${bodyMaxBytes} bytes (UTF-8) after trimming`,
});
const selectedText = storableTextSchema.refine((s) => utf8Length(s) <= selectedTextMaxBytes, {
  message: `selected_text must be at most ${selectedTextMaxBytes} bytes (UTF-8)`,
});
const anchor = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable();
const version = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
/** The typed text of a prompt; the expansion's own limit (bytes) is checked when it is built. */
const content = storableTextSchema.refine((s) => utf8Length(s) <= promptMaxBytes, {
  message: `content must be at most ${promptMaxBytes} bytes (UTF-8)`,
});

export const planCommentRefSchema = z.object({ id: idSchema, version }).strict();
const refs = z
  .array(planCommentRefSchema)
  .max(PLAN_COMMENT_LIMITS.refsPerPrompt, { message: `at most ${PLAN_COMMENT_LIMITS.refsPerPrompt} plan comment refs` });
const attachmentIds = z.array(idSchema).max(20, { message: 'at most 20 attachments' });

export const planCommentListSchema = z.object({ task_id: idSchema }).strict();

export const planCommentCreateSchema = z
  .object({
    task_id: idSchema,
    plan_id: idSchema,
    comment_id: idSchema,
    body,
    selected_text: selectedText.optional(),
    anchor_from: anchor.optional(),
    anchor_to: anchor.optional(),
  })
  .strict();

export const planCommentUpdateSchema = z.object({ task_id: idSchema, plan_id: idSchema, comment_id: idSchema, version, body }).strict();
export const planCommentDeleteSchema = z.object({ task_id: idSchema, plan_id: idSchema, comment_id: idSchema, version }).strict();
export const planDeleteSchema = z.object({ task_id: idSchema, plan_id: idSchema }).strict();

/** A browser draft as Kandev's web client kept it in sessionStorage (camelCase, its own shape). */
export const legacyDraftSchema = z
  .object({
    id: idSchema,
    sessionId: idSchema,
    text: storableTextSchema.refine((s) => utf8Length(s.trim()) <= bodyMaxBytes, {
      message: `text must be at most ${bodyMaxBytes} bytes (UTF-8) after trimming`,
    }),
    createdAt: storableTextSchema.max(64),
    status: storableTextSchema.max(64).optional(),
    source: storableTextSchema.max(64).optional(),
    selectedText: selectedText.optional(),
    from: anchor.optional(),
    to: anchor.optional(),
  })
  .strict();

export const importLegacySchema = z
  .object({ task_id: idSchema, drafts: z.array(legacyDraftSchema).max(PLAN_COMMENT_LIMITS.commentsPerPlan * 5, { message: 'too many drafts' }) })
  .strict();

const sendShape = {
  session_id: idSchema,
  caller_id: callerIdSchema,
  content: content.default(''),
  plan_comment_refs: refs.optional(),
  attachment_ids: attachmentIds.optional(),
  /** Who staged the attachments (their `owner_id`); required with `attachment_ids`. */
  attachment_owner_id: idSchema.optional(),
};

const model = storableTextSchema.refine((s) => s.length <= 256, { message: 'model must be at most 256 characters' });

/** The model and plan mode the agent takes the prompt with (direct or queued alike). */
const promptOptions = {
  model: model.optional(),
  plan_mode: z.boolean().optional(),
};

export const messageSendSchema = z.object({ ...sendShape, ...promptOptions }).strict();

/** `queue.enqueue`: a send's body, delivered by the dispatcher instead of at once. */
export const queueEnqueueSchema = z.object({ ...sendShape, ...promptOptions }).strict();

export const queueListSchema = z.object({ session_id: idSchema }).strict();
export const queueRemoveSchema = z.object({ session_id: idSchema, queue_id: idSchema }).strict();
export const queueClearSchema = z.object({ session_id: idSchema }).strict();

/** `queue.update`: the fields to change of one waiting entry, at the `version` its author saw; at least one. */
export const queueUpdateSchema = z
  .object({
    session_id: idSchema,
    queue_id: idSchema,
    version,
    content: content.optional(),
    model: model.optional(),
    plan_mode: z.boolean().optional(),
    attachment_ids: attachmentIds.optional(),
    attachment_owner_id: idSchema.optional(),
  })
  .strict()
  .refine((r) => r.content !== undefined || r.model !== undefined || r.plan_mode !== undefined || r.attachment_ids !== undefined, {
    message: 'name at least one of content, model, plan_mode, attachment_ids',
  });

/** `queue.reorder`: every waiting entry in the new order, at the queue `revision` its author saw. */
export const queueReorderSchema = z
  .object({
    session_id: idSchema,
    queue_ids: z.array(idSchema).max(1000, { message: 'at most 1000 queue ids' }),
    revision: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  })
  .strict();

export const planCommentRunSchema = z
  .object({
    task_id: idSchema,
    caller_id: callerIdSchema,
    plan_comment_refs: refs.min(1, { message: 'Run carries at least one plan comment ref' }),
    content: content.default(''),
    ...promptOptions,
  })
  .strict();

/** Longest a staged attachment may stay claimable. */
export const ATTACHMENT_MAX_TTL_MS = 7 * 24 * 3_600_000;
export const ATTACHMENT_DEFAULT_TTL_MS = 24 * 3_600_000;

export const attachmentStageSchema = z
  .object({
    id: idSchema,
    owner_id: idSchema,
    workspace_id: idSchema,
    task_id: idSchema.optional(),
    session_id: idSchema.optional(),
    name: storableTextSchema.refine((s) => s.length <= 1024, { message: 'name is too long' }),
    mime_type: storableTextSchema.min(1).max(255),
    size_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    storage_key: idSchema,
    kind: storableTextSchema.min(1).max(64).optional(),
    delivery_mode: storableTextSchema.min(1).max(64).optional(),
    ttl_ms: z.number().int().min(1000).max(ATTACHMENT_MAX_TTL_MS).default(ATTACHMENT_DEFAULT_TTL_MS),
  })
  .strict();

export type PlanCommentListRequest = z.input<typeof planCommentListSchema>;
export type PlanCommentCreateRequest = z.input<typeof planCommentCreateSchema>;
export type PlanCommentUpdateRequest = z.input<typeof planCommentUpdateSchema>;
export type PlanCommentDeleteRequest = z.input<typeof planCommentDeleteSchema>;
export type PlanDeleteRequest = z.input<typeof planDeleteSchema>;
export type ImportLegacyRequest = z.input<typeof importLegacySchema>;
export type MessageSendRequest = z.input<typeof messageSendSchema>;
export type PlanCommentRunRequest = z.input<typeof planCommentRunSchema>;
export type QueueEnqueueRequest = z.input<typeof queueEnqueueSchema>;
export const queueSetAutoRunSchema = z.object({ session_id: idSchema, auto_run: z.boolean() }).strict();
export const queueDrainSchema = z.object({ session_id: idSchema }).strict();

export type QueueListRequest = z.input<typeof queueListSchema>;
export type QueueRemoveRequest = z.input<typeof queueRemoveSchema>;
export type QueueClearRequest = z.input<typeof queueClearSchema>;
export type QueueUpdateRequest = z.input<typeof queueUpdateSchema>;
export type QueueReorderRequest = z.input<typeof queueReorderSchema>;
export type QueueSetAutoRunRequest = z.input<typeof queueSetAutoRunSchema>;
export type QueueDrainRequest = z.input<typeof queueDrainSchema>;
export type AttachmentStageRequest = z.input<typeof attachmentStageSchema>;
