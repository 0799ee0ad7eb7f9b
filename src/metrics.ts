import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One series of the prompt receipt gauge: receipts of a kind (`direct`, `queued`) in a step of delivery. */
export interface PromptReceiptCount {
  kind: string;
  state: string;
  count: number;
}

export interface PromptReceiptSource {
  /** Every series; undefined when this database holds no receipts at all (no receipt table). */
  read(): Promise<readonly PromptReceiptCount[] | undefined>;
  /** How old a read may be before a scrape reads again. */
  maxAgeMs: number;
  /** A read that failed: the gauge keeps its last values, and the scrape still answers. */
  onError(err: unknown): void;
}

/** Request/reply latency buckets: from a cached read to clarification.respond's 30 s deadline and past it. */
const ENDPOINT_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Prometheus metrics of one worker process, on its own registry (several workers can share a
 * process in tests). Every name starts `pending_projector_`, Node's and the process's own
 * included; docs/metrics.md describes each one, and a test keeps the two equal.
 */
export function createMetrics() {
  const registry = new Registry();
  // prom-client's names already start with `process_` or `nodejs_`: the prefix is only ours.
  collectDefaultMetrics({ register: registry, prefix: 'pending_projector_' });

  // Read at scrape time, at most once per maxAgeMs: a scrape costs one small COUNT, and no
  // database read happens while nobody scrapes. One read at a time, shared by concurrent scrapes.
  let receiptSource: PromptReceiptSource | undefined;
  let receiptsReadAt = -Infinity;
  let receiptsReading: Promise<void> | undefined;
  const promptReceipts: Gauge<'kind' | 'state'> = new Gauge({
    name: 'pending_projector_prompt_receipts',
    help: 'Prompt receipts in the database not yet delivered, by kind (direct, queued) and state (waiting, reserved, attempted); the same on every replica',
    labelNames: ['kind', 'state'] as const,
    registers: [registry],
    async collect() {
      const source = receiptSource;
      if (!source || Date.now() - receiptsReadAt < source.maxAgeMs) return;
      receiptsReading ??= source
        .read()
        .then(
          (counts) => {
            receiptsReadAt = Date.now();
            promptReceipts.reset();
            for (const { kind, state, count } of counts ?? []) promptReceipts.set({ kind, state }, count);
          },
          (err: unknown) => source.onError(err),
        )
        .finally(() => (receiptsReading = undefined));
      await receiptsReading;
    },
  });
  return {
    registry,
    /** Reads the prompt receipt gauge from `source` from now on (the worker, once its receipt store exists). */
    readPromptReceiptsFrom(source: PromptReceiptSource) {
      receiptSource = source;
    },
    promptReceipts,
    endpointRequests: new Counter({
      name: 'pending_projector_endpoint_requests_total',
      help: 'Request/reply requests answered, by endpoint and reply code (ok, bad_request, not_found, conflict, retryable, unavailable, internal)',
      labelNames: ['endpoint', 'code'] as const,
      registers: [registry],
    }),
    endpointSeconds: new Histogram({
      name: 'pending_projector_endpoint_request_duration_seconds',
      help: 'Time from a request reaching the worker to its reply being sent, by endpoint',
      labelNames: ['endpoint'] as const,
      buckets: ENDPOINT_SECONDS_BUCKETS,
      registers: [registry],
    }),
    promptDeliveryAttempts: new Counter({
      name: 'pending_projector_prompt_delivery_attempts_total',
      help: 'Prompt receipts this dispatcher reserved, by outcome (acknowledged, unconfirmed, released, failed, abandoned, lost)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    dispatcherSessions: new Gauge({
      name: 'pending_projector_prompt_dispatcher_sessions',
      help: "Sessions this replica's prompt dispatcher is delivering to now (delivering) or that wait for one of its slots (waiting)",
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    events: new Counter({
      name: 'pending_projector_events_total',
      help: 'Inbound events by outcome (projected, skipped, unknown_type, no_task, other_partition, dead_lettered, retried)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    projections: new Counter({
      name: 'pending_projector_projections_total',
      help: 'Projections by result (changed, unchanged, unknown_task, failed)',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    foreignSummaryWrites: new Counter({
      name: 'pending_projector_foreign_summary_writes_total',
      help: 'Summary rows this replica read written by another writer that changed a field this service owns (pending_action, queued_prompt_count), by field',
      labelNames: ['field'] as const,
      registers: [registry],
    }),
    casConflicts: new Counter({ name: 'pending_projector_cas_conflicts_total', help: 'Lost summary compare-and-set attempts', registers: [registry] }),
    deadLetters: new Counter({
      name: 'pending_projector_dead_letters_total',
      help: 'Events written to the dead-letter stream',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
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
    consumerLag: new Gauge({
      name: 'pending_projector_consumer_lag',
      help: 'Events in the stream not yet delivered to the consumer (num_pending)',
      registers: [registry],
    }),
    ackPending: new Gauge({ name: 'pending_projector_consumer_ack_pending', help: 'Events delivered but not yet acknowledged', registers: [registry] }),
    reconcileTasks: new Counter({
      name: 'pending_projector_reconcile_tasks_total',
      help: 'Tasks the boot reconcile visited (visited) and found drifted (drifted)',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    bucketRefills: new Counter({
      name: 'pending_projector_summary_bucket_refills_total',
      help: 'Refills of the summary KV bucket from the database (at start, or after the bus lost it), by result (done, failed)',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    bucketKeysFilled: new Counter({
      name: 'pending_projector_summary_bucket_keys_filled_total',
      help: 'Empty summary bucket keys a refill filled',
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
