import type { PublishedSummary } from './publishedSummary.js';
import type { PendingAction } from '../turns/pendingAction.js';
import type { ClarificationAnswerPayload } from './clarificationPayloads.js';
import type { ConsumerStatsPayload, DeadLetterPayload, DriftPayload, ReplicaStatsPayload } from './operationsPayloads.js';
import type { Reply, ReplyErrorCode, ReplyFailure } from './replyErrorCodes.js';

/** Reply bodies of the worker's endpoints (snake_case on the wire, like Kandev's JSON). */

export type { Reply, ReplyErrorCode, ReplyFailure };

export interface RespondResult {
  pending_id: string;
  session_id: string;
  task_id: string;
  /** True for the one response that claimed the bundle; false for a replay of the recorded outcome. */
  claimed: boolean;
  status: 'answered' | 'rejected';
  /** In the bundle's question order; empty for a rejection. */
  answers: ClarificationAnswerPayload[];
  reject_reason: string;
  responded_at: string;
  /** How the claim reached the agent; null on a replay. */
  delivery: 'live' | 'resume' | 'none' | null;
}

export interface PendingQuestion {
  message_id: string;
  question_id: string;
  question: unknown;
  status: string;
  agent_disconnected: boolean;
}

export interface PendingBundle {
  pending_id: string;
  session_id: string;
  task_id: string;
  workspace_id: string;
  turn_id: string;
  created_at: string;
  context: string;
  questions: PendingQuestion[];
}

export interface ListPendingResult {
  bundles: PendingBundle[];
  /** Pass back as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

export interface DetachResult {
  session_id: string;
  /** Rows this call detached; empty on a repeat (which writes and publishes nothing). */
  detached_message_ids: string[];
  pending_ids: string[];
}

export interface ExpireResult {
  session_id: string;
  expired_pending_ids: string[];
  expired_message_ids: string[];
}

export interface GuardResult {
  session_id: string;
  /** The current turn holds a pending clarification, detached or not: refuse auto-advance. */
  blocked: boolean;
  /** Some such question still has a live (not detached) waiter. */
  live: boolean;
  pending_ids: string[];
}

/** The guard fails closed: a failure still says `blocked: true`. */
export type GuardFailure = ReplyFailure & { blocked: true; live: true };

/** The fields every guard failure carries, a `bad_request` included (the endpoint adds them to each). */
export const GUARD_FAILURE_FIELDS = { blocked: true, live: true } as const satisfies Pick<GuardFailure, 'blocked' | 'live'>;

export interface TurnPayload {
  id: string;
  session_id: string;
  task_id: string;
  started_at: string;
  created_at: string;
  updated_at: string;
  /** Absent while the turn is open. */
  completed_at?: string;
  /** Includes `lifecycle_only` when set (spec AC-11). */
  metadata: Record<string, unknown>;
}

export interface TurnsResult {
  session_id: string;
  /** Visible history (Kandev's history predicate), oldest first. */
  turns: TurnPayload[];
  /** The server's current turn (null when none resolves). */
  current_turn_id: string | null;
}

export interface SessionPendingActionPayload {
  session_id: string;
  state: string;
  is_primary: boolean;
  /** Set only for input-capable sessions. */
  pending_action: PendingAction | null;
}

export interface PendingActionsResult {
  task_id: string;
  workspace_id: string;
  /** Task-level value: permission beats clarification over input-capable sessions. */
  pending_action: PendingAction | null;
  sessions: SessionPendingActionPayload[];
}

export interface SummaryResult {
  task_id: string;
  workspace_id: string;
  status_summary: PublishedSummary;
}

export interface ReprojectResult {
  task_id: string;
}

export interface TaskListEntry {
  task_id: string;
  workspace_id: string;
  /** The stored summary after this read's repair; null for a task that has none yet. */
  status_summary: PublishedSummary | null;
}

export interface TaskListResult {
  tasks: TaskListEntry[];
  /** Pass back as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

export type RespondReply = Reply<RespondResult>;
export type ListPendingReply = Reply<ListPendingResult>;
export type DetachReply = Reply<DetachResult>;
export type ExpireReply = Reply<ExpireResult>;
export type GuardReply = ({ ok: true } & GuardResult) | GuardFailure;
export type TurnsReply = Reply<TurnsResult>;
export type PendingActionsReply = Reply<PendingActionsResult>;
export type SummaryReply = Reply<SummaryResult>;
export type ReprojectReply = Reply<ReprojectResult>;
export type TaskListReply = Reply<TaskListResult>;
export type DeadLetterListReply = Reply<{ dead_letters: DeadLetterPayload[] }>;
/** `original`: the given-up event as the events stream still holds it (null once retention dropped it). */
export type DeadLetterShowReply = Reply<{ dead_letter: DeadLetterPayload; original: { subject: string; data: string } | null }>;
export type DeadLetterRetryReply = Reply<{ seq: number; new_stream_seq: number }>;
export type ConsumerStatsReply = Reply<ConsumerStatsPayload>;
/** One replica answers with itself; the typed client gathers every replica's entries, sorted by `replica`. */
export type ReplicaStatsReply = Reply<{ replicas: ReplicaStatsPayload[] }>;
/** `checked` tasks of this page; `drifted` those whose stored summary differs from a fresh derivation. */
export type SummaryVerifyReply = Reply<{ checked: number; drifted: DriftPayload[]; next_cursor: string | null }>;

export function failure(code: ReplyErrorCode, message: string): ReplyFailure {
  return { ok: false, error: { code, message } };
}
