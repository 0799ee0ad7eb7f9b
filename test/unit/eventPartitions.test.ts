import { describe, expect, it } from 'vitest';
import { partitionConsumerName, partitionLeaseName, partitionMemberLeasePrefix, partitionOf, planPartitions } from '../../src/contract/eventPartitions.js';
import { topologyFor } from '../../src/contract/subjects.js';

describe('partitionOf', () => {
  it('gives the same partition for a task id in every process and version (pinned values)', () => {
    expect([partitionOf('t1', 2), partitionOf('t1', 4), partitionOf('t1', 7)]).toEqual([0, 2, 0]);
    expect([partitionOf('bt-0000001', 2), partitionOf('bt-0000001', 4), partitionOf('bt-0000001', 7)]).toEqual([1, 1, 6]);
    expect(partitionOf('3f2a6c1e-9b7d-4c1a-8e2f-0a1b2c3d4e5f', 4)).toBe(2);
  });

  it('puts everything in partition 0 when there is one partition', () => {
    expect(partitionOf('anything', 1)).toBe(0);
    expect(partitionOf('anything', 0)).toBe(0);
  });

  it('spreads sequential and UUID-shaped ids within 10% of an even share', () => {
    const ids = [
      ...Array.from({ length: 8000 }, (_, i) => `bt-${String(i).padStart(7, '0')}`),
      ...Array.from({ length: 8000 }, (_, i) => `${i.toString(16).padStart(8, '0')}-9b7d-4c1a-8e2f-${(i * 7919).toString(16).padStart(12, '0')}`),
    ];
    for (const partitions of [2, 3, 4, 8]) {
      const counts = new Array<number>(partitions).fill(0);
      for (const id of ids) counts[partitionOf(id, partitions)]!++;
      const even = ids.length / partitions;
      for (const count of counts) expect(Math.abs(count - even) / even, `${partitions} partitions: ${counts.join(', ')}`).toBeLessThan(0.1);
    }
  });
});

describe('planPartitions', () => {
  it('claims every partition while alone', () => {
    expect(planPartitions(4, 1, [])).toEqual({ release: [], claim: 4 });
  });

  it('gives up the highest-numbered extras when another replica appears', () => {
    expect(planPartitions(4, 2, [0, 1, 2, 3])).toEqual({ release: [2, 3], claim: 0 });
    expect(planPartitions(2, 2, [1, 0])).toEqual({ release: [1], claim: 0 });
  });

  it('takes up to its share after a replica is gone, and rounds the share up', () => {
    expect(planPartitions(2, 1, [1])).toEqual({ release: [], claim: 1 });
    expect(planPartitions(5, 2, [0, 1])).toEqual({ release: [], claim: 1 });
  });

  it('leaves a replica beyond the partition count idle but ready', () => {
    expect(planPartitions(2, 3, [])).toEqual({ release: [], claim: 1 });
    expect(planPartitions(2, 3, [0])).toEqual({ release: [], claim: 0 });
  });
});

describe('partition names', () => {
  it("names each partition consumer and lease after the prefix and the partition count: a new count never reuses an old position, another deployment never holds this one's lease", () => {
    const topology = topologyFor('acme.');
    expect(partitionConsumerName(topology, 1, 2)).toBe('acme_pending-projector-p1of2');
    expect(partitionLeaseName(topology, 1, 2)).toBe('event_partition.acme_pending-projector-p1of2');
    expect(partitionMemberLeasePrefix(topology)).toBe('event_partition_member.acme_pending-projector.');
    expect(partitionConsumerName(topology, 1, 4)).not.toBe(partitionConsumerName(topology, 1, 2));
  });
});
