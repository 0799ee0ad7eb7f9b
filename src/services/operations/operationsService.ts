import type { ConsumerStatsPayload, DeadLetterPayload, DriftPayload, ReplicaStatsPayload } from '../../contract/operationsPayloads.js';
import {
  failure,
  type ConsumerStatsReply,
  type DeadLetterListReply,
  type DeadLetterRetryReply,
  type DeadLetterShowReply,
  type ReplicaStatsReply,
  type SummaryVerifyReply,
} from '../../contract/replies.js';
import type { DeadLetterIdRequest, DeadLetterListRequest, SummaryVerifyRequest } from '../../contract/requests.js';
import { decodeTaskIdCursor, encodeTaskIdCursor } from '../taskIdCursor.js';

/** The dead-letter stream and the consumer, as the bus holds them (events/natsOperations.ts). */
export interface OperationsBus {
  listDeadLetters(limit: number): Promise<DeadLetterPayload[]>;
  showDeadLetter(id: number): Promise<{ dead_letter: DeadLetterPayload; original: { subject: string; data: string } | null } | null>;
  retryDeadLetter(id: number): Promise<{ ok: true; newStreamSeq: number } | { ok: false; reason: 'not_found' | 'original_expired' }>;
  consumerStats(): Promise<ConsumerStatsPayload>;
}

/** The dry-run verify's reads: task ids in id order, and the drift of a page of them (projectors/reconcile.ts). */
interface DriftReader {
  listTaskIdsAfter(afterTaskId: string | null, limit: number): Promise<string[]>;
  findDrift(taskIds: readonly string[]): Promise<DriftPayload[]>;
}

/** This process's own numbers: its event counter and the partitions it holds (bin/worker/replicaStats.ts). */
export interface ReplicaStatsSource {
  read(): Promise<ReplicaStatsPayload>;
}

export interface OperationsServiceDeps {
  bus: OperationsBus;
  drift: DriftReader;
  /** Absent: replica.stats answers `unavailable` (an embedder without per-process metrics). */
  replica?: ReplicaStatsSource;
}

/**
 * The operations endpoints: what the `dead-letters` and `verify` commands and `/metrics` show,
 * for a console that has only the bus. `summary.verify` writes nothing; `dead_letter.retry` is the
 * only one that changes anything (it re-injects the event and removes its record).
 */
export interface OperationsService {
  listDeadLetters(request: DeadLetterListRequest): Promise<DeadLetterListReply>;
  showDeadLetter(request: DeadLetterIdRequest): Promise<DeadLetterShowReply>;
  retryDeadLetter(request: DeadLetterIdRequest): Promise<DeadLetterRetryReply>;
  consumerStats(): Promise<ConsumerStatsReply>;
  /** This replica only: every replica answers `replica.stats`, and the client gathers them. */
  replicaStats(): Promise<ReplicaStatsReply>;
  verifySummaries(request: SummaryVerifyRequest): Promise<SummaryVerifyReply>;
}

const noDeadLetter = (seq: number) => failure('not_found', `dead letter ${seq} does not exist (retried or removed already?)`);

export function createOperationsService({ bus, drift, replica }: OperationsServiceDeps): OperationsService {
  return {
    async listDeadLetters({ limit }) {
      return { ok: true, dead_letters: await bus.listDeadLetters(limit) };
    },

    async showDeadLetter({ seq }) {
      const shown = await bus.showDeadLetter(seq);
      return shown ? { ok: true, ...shown } : noDeadLetter(seq);
    },

    async retryDeadLetter({ seq }) {
      const retried = await bus.retryDeadLetter(seq);
      if (retried.ok) return { ok: true, seq, new_stream_seq: retried.newStreamSeq };
      if (retried.reason === 'not_found') return noDeadLetter(seq);
      return failure('conflict', `dead letter ${seq}: the events stream no longer holds the original event (retention dropped it); nothing to retry`);
    },

    async consumerStats() {
      return { ok: true, ...(await bus.consumerStats()) };
    },

    async replicaStats() {
      if (!replica) return failure('unavailable', 'this worker does not report its own numbers');
      return { ok: true, replicas: [await replica.read()] };
    },

    async verifySummaries({ limit, cursor }) {
      const after = cursor === undefined ? null : decodeTaskIdCursor(cursor);
      if (after === undefined) return failure('bad_request', 'cursor is not one this service issued');
      const page = await drift.listTaskIdsAfter(after, limit + 1);
      const checked = page.slice(0, limit);
      return {
        ok: true,
        checked: checked.length,
        drifted: await drift.findDrift(checked),
        next_cursor: page.length > limit ? encodeTaskIdCursor(checked[checked.length - 1]!) : null,
      };
    },
  };
}
