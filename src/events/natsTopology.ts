import type { NatsConnection } from '@nats-io/transport-node';
import { nanos } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type ConsumerInfo,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import type { Topology } from '../contract/subjects.js';
import { partitionConsumerName } from '../contract/eventPartitions.js';
import { SummaryBucket, type BucketStorage } from './summaryBucket.js';
import { isNotFound } from './isNotFound.js';

export interface TopologyOptions {
  topology: Topology;
  streamMaxAgeMs: number;
  maxDeliver: number;
  ackWaitMs: number;
  /** Storage of the summary bucket when it has to be created (default memory). */
  bucketStorage?: BucketStorage;
  /** Replicas of every stream and the bucket when they have to be created (default 1). */
  replicas?: number;
  /** EVENT_PARTITIONS: above 1, one durable consumer per partition beside the shared one (default 1). */
  eventPartitions?: number;
}

/** A stream (or the bucket's stream) that exists with another replica count than the one asked for: it is left as it is. */
export interface ReplicaMismatch {
  stream: string;
  replicas: number;
  wanted: number;
}

export interface EnsuredTopology {
  jsm: JetStreamManager;
  summaries: SummaryBucket;
  /** The existing streams whose replica count differs from `replicas`, unchanged. */
  replicaMismatches: ReplicaMismatch[];
}

/**
 * Creates the stream, or brings an existing one's subjects and max age to `config`. Its replica
 * count is never changed here: moving a stream between 1 and 3 replicas makes the cluster copy or
 * drop its data, an operator's decision, so a difference is returned for the caller to report.
 */
async function ensureStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string; subjects: string[]; num_replicas: number },
): Promise<ReplicaMismatch | undefined> {
  let info: StreamInfo;
  try {
    info = await jsm.streams.info(config.name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await untilLed(jsm, await jsm.streams.add(config));
    return undefined;
  }
  const wanted = [...config.subjects].sort().join(',');
  if ([...info.config.subjects].sort().join(',') !== wanted || info.config.max_age !== config.max_age) {
    await jsm.streams.update(config.name, { ...info.config, subjects: config.subjects, max_age: config.max_age ?? info.config.max_age });
  }
  await untilLed(jsm, info);
  return replicaMismatch(config.name, info.config.num_replicas, config.num_replicas);
}

/**
 * On a cluster, a stream just created (here, or by another replica racing this one) takes its peers
 * a moment to elect a leader, and until then every publish to it fails with "no responders": a
 * projection's first publishes would fail and be retried at a higher revision. Waits, bounded, for
 * the leader; a stream still without one is left to the publishers' own retries. A single server's
 * streams have no cluster info and need no wait.
 */
async function untilLed(jsm: JetStreamManager, info: StreamInfo, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let cluster = info.cluster; cluster && !cluster.leader && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    cluster = (await jsm.streams.info(info.config.name)).cluster;
  }
}

function replicaMismatch(stream: string, replicas: number, wanted: number): ReplicaMismatch | undefined {
  // A count of 0 (a stream made without one) is the server default: one replica.
  const actual = Math.max(1, replicas);
  return actual === wanted ? undefined : { stream, replicas: actual, wanted };
}

/**
 * Creates or updates everything the worker needs, idempotently (several replicas may race here):
 * - the events stream capturing Kandev's plain publishes on the inbound subjects, so nothing sent
 *   while no worker runs is lost (limits retention keeps history for `replay`);
 * - the output stream for summaries, session pending actions, plan-comment collections and plan
 *   deletions (its duplicate window dedupes retried publishes by `task_id:revision`,
 *   `task_id:plan_id:revision`, `task_id:plan_id:task_plan.deleted`);
 * - the dead-letter stream, which also captures JetStream's MAX_DELIVERIES advisories of the
 *   worker's consumer (an event no delivery ever settled, e.g. one that crashed the worker);
 * - the agent resume stream capturing `<prefix>agent.*.resume` (detached clarification answers);
 * - the agent prompt stream capturing `<prefix>agent.*.prompt` (delivered prompt receipts);
 * - the durable pull consumer shared by every replica, and with EVENT_PARTITIONS one per partition
 *   (ADR 0020), each over the whole stream;
 * - the KV bucket holding the latest summary per task for late joiners (SummaryBucket).
 */
export async function ensureTopology(nc: NatsConnection, options: TopologyOptions): Promise<EnsuredTopology> {
  const { topology } = options;
  const replicas = options.replicas ?? 1;
  const jsm = await jetstreamManager(nc);
  const replicaMismatches: ReplicaMismatch[] = [];
  const ensure = async (config: Parameters<typeof ensureStream>[1]) => {
    const mismatch = await ensureStream(jsm, config);
    if (mismatch) replicaMismatches.push(mismatch);
  };
  await ensure({
    name: topology.eventsStream,
    subjects: topology.inboundSubjects,
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    storage: StorageType.File,
    max_age: nanos(options.streamMaxAgeMs),
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(2 * 60_000),
  });
  const advisory = (consumer: string) => `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${topology.eventsStream}.${consumer}`;
  await ensure({
    name: topology.deadLetterStream,
    // Only MAX_DELIVERIES: the worker terminates an event itself only after writing its own record.
    subjects: [topology.deadLetterSubject, ...eventConsumers(topology, options.eventPartitions ?? 1).map((c) => advisory(c))],
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    storage: StorageType.File,
    max_age: nanos(options.streamMaxAgeMs),
  });
  // Detached clarification resumes: the PubAck of this stream is the "acknowledged" of the respond
  // deadline, and its duplicate window (longer than any deadline) dedupes a retried resume by msgID.
  await ensure({
    name: topology.agentResumeStream,
    subjects: topology.agentResumeSubjects,
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    storage: StorageType.File,
    max_age: nanos(options.streamMaxAgeMs),
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(15 * 60_000),
  });
  // Prompts to agents: one publish per receipt, after its at-most-once delivery marker; the PubAck
  // is the prompt's acceptance, and the stream is what reconciliation inspects (by `prompt:<receipt
  // id>`) to label an attempt whose acknowledgement was never handled.
  await ensure({
    name: topology.agentPromptStream,
    subjects: topology.agentPromptSubjects,
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    storage: StorageType.File,
    max_age: nanos(options.streamMaxAgeMs),
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(15 * 60_000),
  });
  const shared = await ensureConsumer(jsm, topology, topology.consumer, options);
  const partitions = options.eventPartitions ?? 1;
  // A partition consumer made now takes over where the shared one stands: turning partitioning on
  // neither replays the stream nor skips what the shared consumer has not acknowledged.
  const startSeq = shared.ack_floor.stream_seq + 1;
  for (let k = 0; partitions > 1 && k < partitions; k++) await ensureConsumer(jsm, topology, partitionConsumerName(topology, k, partitions), options, startSeq);
  const output = await ensureOutputTopology(nc, topology, { bucketStorage: options.bucketStorage, replicas });
  return { jsm, summaries: output.summaries, replicaMismatches: [...replicaMismatches, ...output.replicaMismatches] };
}

/** The durable consumers the replicas pull: the shared one, or one per partition (EVENT_PARTITIONS). */
export function eventConsumers(topology: Topology, partitions: number): string[] {
  return partitions > 1 ? Array.from({ length: partitions }, (_, k) => partitionConsumerName(topology, k, partitions)) : [topology.consumer];
}

/** Creates the durable pull consumer `name` unless it exists; several replicas may race here. */
async function ensureConsumer(jsm: JetStreamManager, topology: Topology, name: string, options: TopologyOptions, startSeq?: number): Promise<ConsumerInfo> {
  try {
    return await jsm.consumers.info(topology.eventsStream, name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  try {
    return await jsm.consumers.add(topology.eventsStream, {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      ...(startSeq && startSeq > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: startSeq } : { deliver_policy: DeliverPolicy.All }),
      ack_wait: nanos(options.ackWaitMs),
      max_deliver: options.maxDeliver,
      max_ack_pending: 4096,
    });
  } catch (addErr) {
    // Another replica created it first.
    return await jsm.consumers.info(topology.eventsStream, name).catch(() => {
      throw addErr;
    });
  }
}

/**
 * Only what publishing projections needs (the output stream and the KV bucket), for one-shot
 * commands (reconcile, replay) that must not touch the events stream's settings or the consumer.
 */
export async function ensureOutputTopology(
  nc: NatsConnection,
  topology: Topology,
  options: { bucketStorage?: BucketStorage; replicas?: number } = {},
): Promise<Omit<EnsuredTopology, 'jsm'>> {
  const replicas = options.replicas ?? 1;
  const jsm = await jetstreamManager(nc);
  const output = await ensureStream(jsm, {
    name: topology.outputStream,
    // An output stream made before plan comments (or plan deletions) were published gets their
    // subjects added (ensureStream updates it).
    subjects: [topology.summarySubject, topology.sessionPendingSubject, topology.planCommentsSubject, topology.planDeletedSubject],
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    storage: StorageType.File,
    max_age: nanos(24 * 3_600_000),
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(10 * 60_000),
  });
  const summaries = await SummaryBucket.open(nc, topology, options.bucketStorage, replicas);
  const bucketInfo = await jsm.streams.info(topology.summaryBucketStream);
  await untilLed(jsm, bucketInfo);
  const bucket = replicaMismatch(topology.summaryBucketStream, bucketInfo.config.num_replicas, replicas);
  return { summaries, replicaMismatches: [output, bucket].filter((m) => m !== undefined) };
}

/** KV keys allow [-/_=.a-zA-Z0-9]; other task ids are stored base64url-encoded behind "b64.". */
export function summaryKey(taskId: string): string {
  return /^[-_=A-Za-z0-9]+$/.test(taskId) ? taskId : `b64.${Buffer.from(taskId).toString('base64url')}`;
}
