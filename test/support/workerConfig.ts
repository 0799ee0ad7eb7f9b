import type { WorkerConfig } from '../../src/bin/worker.js';

/** A worker configuration for in-process tests: a free health port, short timeouts, small limits. */
export function testWorkerConfig(prefix: string, overrides: Partial<WorkerConfig> = {}): WorkerConfig {
  return {
    subjectPrefix: prefix,
    healthPort: 0,
    projectionBatchSize: 8,
    projectionTransactions: 2,
    maxEventBytes: 64 * 1024,
    maxDeliver: 5,
    ackWaitMs: 5000,
    streamMaxAgeMs: 3_600_000,
    reconcilePageSize: 100,
    bootReconcile: false,
    respondDeadlineMs: 5000,
    ...overrides,
  };
}
