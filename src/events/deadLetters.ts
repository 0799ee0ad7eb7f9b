import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { DeadLetterRecord } from '../contract/operationsPayloads.js';
import type { Topology } from '../contract/subjects.js';

export type { DeadLetterRecord };

/**
 * Dead letters are pointers: the original event stays in the events stream (limits retention), and
 * the dead-letter stream holds why it was given up. `retry` republishes the original bytes on their
 * original subject and removes the record.
 */
export interface DeadLetterEntry {
  /** Sequence in the dead-letter stream: the id `show` and `retry` take. */
  id: number;
  record: DeadLetterRecord;
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

export function previewOf(data: Uint8Array): string {
  return decoder.decode(data.subarray(0, 512));
}

export async function writeDeadLetter(nc: NatsConnection, topology: Topology, record: DeadLetterRecord): Promise<void> {
  await jetstream(nc).publish(topology.deadLetterSubject, encoder.encode(JSON.stringify(record)), {
    // One record per event and reason, however many times a crash makes us write it.
    msgID: `dead:${record.stream_seq}:${record.reason}`,
  });
}

function normalise(id: number, subject: string, data: Uint8Array, time: string): DeadLetterEntry {
  const value = JSON.parse(decoder.decode(data)) as Record<string, unknown>;
  if (subject.startsWith('$JS.EVENT.ADVISORY.')) {
    return {
      id,
      record: {
        kind: 'max_deliveries',
        reason: 'max_deliveries',
        detail: `JetStream gave up after ${String(value.deliveries)} deliveries without an acknowledgement`,
        subject: '',
        stream_seq: Number(value.stream_seq),
        delivery_count: Number(value.deliveries),
        dead_lettered_at: time,
        payload_bytes: 0,
        payload_preview: '',
      },
    };
  }
  return { id, record: value as unknown as DeadLetterRecord };
}

export async function listDeadLetters(jsm: JetStreamManager, topology: Topology, limit = 100): Promise<DeadLetterEntry[]> {
  const info = await jsm.streams.info(topology.deadLetterStream);
  const entries: DeadLetterEntry[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && entries.length < limit; seq++) {
    const stored = await jsm.streams.getMessage(topology.deadLetterStream, { seq }).catch(() => null);
    if (!stored) continue;
    entries.push(normalise(seq, stored.subject, stored.data, stored.time.toISOString()));
  }
  return entries;
}

export interface DeadLetterDetail extends DeadLetterEntry {
  original: { subject: string; data: string } | null;
}

export async function showDeadLetter(jsm: JetStreamManager, topology: Topology, id: number): Promise<DeadLetterDetail | null> {
  const stored = await jsm.streams.getMessage(topology.deadLetterStream, { seq: id }).catch(() => null);
  if (!stored) return null;
  const entry = normalise(id, stored.subject, stored.data, stored.time.toISOString());
  const original = await jsm.streams.getMessage(topology.eventsStream, { seq: entry.record.stream_seq }).catch(() => null);
  return { ...entry, original: original ? { subject: original.subject, data: decoder.decode(original.data) } : null };
}

export type RetryResult = { ok: true; newStreamSeq: number } | { ok: false; reason: 'not_found' | 'original_expired' };

/** Re-injects the original event and deletes the dead-letter record. */
export async function retryDeadLetter(nc: NatsConnection, topology: Topology, id: number): Promise<RetryResult> {
  const jsm = await jetstreamManager(nc);
  const detail = await showDeadLetter(jsm, topology, id);
  if (!detail) return { ok: false, reason: 'not_found' };
  const original = await jsm.streams.getMessage(topology.eventsStream, { seq: detail.record.stream_seq }).catch(() => null);
  if (!original) return { ok: false, reason: 'original_expired' };
  const ack = await jetstream(nc).publish(original.subject, original.data, { msgID: `retry:${original.seq}:${Date.now()}` });
  await jsm.streams.deleteMessage(topology.deadLetterStream, id);
  return { ok: true, newStreamSeq: ack.seq };
}
