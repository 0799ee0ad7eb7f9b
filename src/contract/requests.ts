import { z } from 'zod';
import { idSchema, storableTextSchema } from '../storableText.js';
import { toCanonicalTimestamp } from '../timestamps.js';

/**
 * Request bodies of the worker's endpoints under `<prefix>pending_projector.v1.`, validated by zod
 * before any handler runs (a failure replies `bad_request` and touches nothing). Ids and answer
 * text reach SQL, so they must be strings both dialects store as sent (src/storableText.ts).
 */

/** Kandev's cap on an answer's custom text and a rejection reason, in Unicode code points. */
export const ANSWER_TEXT_MAX_CHARS = 2000;
export const MAX_BUNDLE_QUESTIONS = 4;

const id = idSchema;
const text = storableTextSchema.refine((s) => [...s].length <= ANSWER_TEXT_MAX_CHARS, { message: `must be at most ${ANSWER_TEXT_MAX_CHARS} characters` });

export const answerSchema = z.object({
  question_id: id,
  selected_options: z.array(id).max(16).default([]),
  custom_text: text.default(''),
});

export const respondRequestSchema = z
  .object({
    pending_id: id,
    answers: z
      .array(answerSchema)
      .min(1, { message: 'answers must hold at least one answer' })
      .max(MAX_BUNDLE_QUESTIONS, { message: `a bundle has at most ${MAX_BUNDLE_QUESTIONS} questions, so at most ${MAX_BUNDLE_QUESTIONS} answers` })
      .optional(),
    reject: z.object({ reason: text.default('') }).optional(),
  })
  .superRefine((value, ctx) => {
    if ((value.answers === undefined) === (value.reject === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'give exactly one of "answers" or "reject"', path: [] });
    }
  });
export type RespondRequest = z.input<typeof respondRequestSchema>;
export type ParsedRespondRequest = z.output<typeof respondRequestSchema>;

const timestamp = z.string().refine(
  (s) => {
    try {
      toCanonicalTimestamp(s);
      return true;
    } catch {
      return false;
    }
  },
  { message: 'must be an RFC 3339 UTC timestamp, e.g. 2026-08-27T19:56:39Z' },
);

export const listPendingRequestSchema = z.object({
  workspace_id: id.optional(),
  created_since: timestamp.optional(),
  limit: z.number().int().min(1).max(500),
  // As issued: base64url, no padding. Anything else is no cursor of ours, refused before decoding.
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,1024}$/, { message: 'cursor is not one this service issued' })
    .optional(),
});
export type ListPendingRequest = z.input<typeof listPendingRequestSchema>;

export const taskListRequestSchema = z.object({
  workspace_id: id.optional(),
  limit: z.number().int().min(1).max(500),
  // As issued: base64url, no padding; decoded by the service.
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,1024}$/, { message: 'cursor is not one this service issued' })
    .optional(),
});
export type TaskListRequest = z.input<typeof taskListRequestSchema>;

export const deadLetterListSchema = z.object({ limit: z.number().int().min(1).max(500) });
export type DeadLetterListRequest = z.input<typeof deadLetterListSchema>;

export const deadLetterIdSchema = z.object({ seq: z.number().int().positive() });
export type DeadLetterIdRequest = z.input<typeof deadLetterIdSchema>;

// Strict: a body with any field is refused rather than read as no arguments.
export const noArgumentsSchema = z.object({}).strict();

export const summaryVerifySchema = z.object({
  limit: z.number().int().min(1).max(1000),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,1024}$/, { message: 'cursor is not one this service issued' })
    .optional(),
});
export type SummaryVerifyRequest = z.input<typeof summaryVerifySchema>;

export const sessionRequestSchema = z.object({ session_id: id });
export type SessionRequest = z.input<typeof sessionRequestSchema>;

export const taskRequestSchema = z.object({ task_id: id });
export type TaskRequest = z.input<typeof taskRequestSchema>;
