/**
 * The partition rule of EVENT_PARTITIONS: which partition's consumer handles a task's events. Part
 * of the contract because every replica must agree on it, whatever its version: a replica hashing
 * differently would leave some tasks' events to no one until the other acks them as not its own.
 */
import type { Topology } from './subjects.js';

/**
 * FNV-1a (32 bit) over the key's UTF-16 code units, then modulo `partitions`: cheap, stable across
 * processes and versions, and spreading the seeded and Kandev's UUID ids evenly (test/unit).
 */
export function partitionOf(key: string, partitions: number): number {
  if (partitions <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

/**
 * The durable consumer of partition `k` of `partitions`. The count is in the name: changing it
 * makes a new set of consumers (the rule maps tasks elsewhere), never reuses one whose position
 * belongs to another mapping.
 */
export function partitionConsumerName(topology: Topology, k: number, partitions: number): string {
  return `${topology.consumer}-p${k}of${partitions}`;
}

/**
 * The lease a replica holds while it pulls partition `k` (one holder at a time), named after the
 * consumer: deployments under other subject prefixes on one database never hold each other's.
 */
export function partitionLeaseName(topology: Topology, k: number, partitions: number): string {
  return `event_partition.${partitionConsumerName(topology, k, partitions)}`;
}

/** Start of the membership leases of a deployment's replicas (the count the balance divides by). */
export function partitionMemberLeasePrefix(topology: Topology): string {
  return `event_partition_member.${topology.consumer}.`;
}

/** What a replica does on a lease tick: which of its partitions to give up, and how many more to try to claim. */
export interface PartitionPlan {
  release: number[];
  claim: number;
}

/**
 * The balance every replica applies on its own, with no coordinator: hold at most ceil(P / live
 * replicas) partitions, giving up the highest-numbered extras (so a newcomer finds them free on its
 * next tick), and claim free ones up to that share. A live replica is one whose membership lease is
 * unexpired, itself included.
 */
export function planPartitions(partitions: number, liveReplicas: number, held: readonly number[]): PartitionPlan {
  const share = Math.ceil(partitions / Math.max(1, liveReplicas));
  const sorted = [...held].sort((a, b) => a - b);
  return { release: sorted.slice(share), claim: Math.max(0, share - sorted.length) };
}
