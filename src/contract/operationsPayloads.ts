/** What the operations endpoints (`dead_letter.*`, `consumer.stats`, `summary.verify`) carry. */

/** Why an event was given up, as the dead-letter stream records it. */
export interface DeadLetterRecord {
  kind: 'rejected' | 'max_deliveries';
  reason: string;
  detail: string;
  subject: string;
  stream_seq: number;
  delivery_count: number;
  dead_lettered_at: string;
  payload_bytes: number;
  /** First 512 bytes as text, for a quick look without fetching the original. */
  payload_preview: string;
}

export interface DeadLetterPayload extends DeadLetterRecord {
  /** Its sequence in the dead-letter stream: what `dead_letter.show` and `.retry` take. */
  seq: number;
}

export interface ConsumerStatsPayload {
  stream: string;
  consumer: string;
  /** Events in the stream not yet delivered to the consumer. */
  num_pending: number;
  /** Delivered, not yet acknowledged. */
  num_ack_pending: number;
  num_redelivered: number;
  /** Messages and bytes the events stream holds. */
  stream_messages: number;
  stream_bytes: number;
  dead_letters: number;
}

/** A task whose stored summary differs from a fresh derivation (what `verify` prints). */
export interface DriftPayload {
  task_id: string;
  kind: 'missing' | 'stale' | 'corrupt';
  stored: string | null;
  derived: string | null;
  stored_queued_prompt_count: number;
  derived_queued_prompt_count: number;
}

/** One replica's own numbers (`replica.stats`): every replica answers for itself. */
export interface ReplicaStatsPayload {
  /** `host:pid:random`, the owner name its event partition leases carry. */
  replica: string;
  /** When this process started its worker (canonical timestamp): the counts below are since then. */
  started_at: string;
  /** Inbound events this process handled, by outcome (`projected`, `skipped`, ...): only the outcomes it saw. */
  events_by_outcome: Record<string, number>;
  /** The event partitions it holds now; `[]` when EVENT_PARTITIONS is 1. */
  partitions: number[];
}
