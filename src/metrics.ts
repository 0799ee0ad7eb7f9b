import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one worker process, on its own registry (several workers can share a process in tests). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'pending_projector_process_' });
  return {
    registry,
    events: new Counter({
      name: 'pending_projector_events_total',
      help: 'Inbound events by outcome (projected, skipped, ignored, dead_lettered, retried)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    projections: new Counter({
      name: 'pending_projector_projections_total',
      help: 'Projections by result (changed, unchanged, unknown_task, failed)',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    casConflicts: new Counter({ name: 'pending_projector_cas_conflicts_total', help: 'Lost summary compare-and-set attempts', registers: [registry] }),
    deadLetters: new Counter({ name: 'pending_projector_dead_letters_total', help: 'Events written to the dead-letter stream', labelNames: ['reason'] as const, registers: [registry] }),
    projectionSeconds: new Histogram({
      name: 'pending_projector_projection_duration_seconds',
      help: 'Duration of one projection transaction (reread, compare-and-set, publish), of one task or several',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers: [registry],
    }),
    projectionBatchTasks: new Histogram({
      name: 'pending_projector_projection_batch_tasks',
      help: 'Tasks per projection transaction (several when projections queue for the database)',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers: [registry],
    }),
    consumerLag: new Gauge({ name: 'pending_projector_consumer_lag', help: 'Events in the stream not yet delivered to the consumer (num_pending)', registers: [registry] }),
    ackPending: new Gauge({ name: 'pending_projector_consumer_ack_pending', help: 'Events delivered but not yet acknowledged', registers: [registry] }),
    reconcileTasks: new Counter({ name: 'pending_projector_reconcile_tasks_total', help: 'Tasks visited by reconcile', labelNames: ['result'] as const, registers: [registry] }),
    bucketRefills: new Counter({
      name: 'pending_projector_summary_bucket_refills_total',
      help: 'Refills of the summary KV bucket from the database (at start, or after the bus lost it), by result (done, failed)',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    bucketKeysFilled: new Counter({ name: 'pending_projector_summary_bucket_keys_filled_total', help: 'Empty summary bucket keys a refill filled', registers: [registry] }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
