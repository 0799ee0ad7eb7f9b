import { errors, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, JetStreamApiCodes, JetStreamApiError, StorageType } from '@nats-io/jetstream';
import pRetry from 'p-retry';
import { isNotFound } from './isNotFound.js';
import { Kvm, type KV } from '@nats-io/kv';
import type { Topology } from '../contract/subjects.js';

export const BUCKET_STORAGES = ['memory', 'file'] as const;
export type BucketStorage = (typeof BUCKET_STORAGES)[number];

/**
 * The KV bucket holding the latest summary envelope per task, for late joiners. A copy of what the
 * database holds, never the source of truth, so it may live in memory (the default): on nats-server
 * 2.9 a put into a file bucket removes the key's previous entry from its 8 MB block, and a block that
 * is not cached is loaded (and, once half deleted, rewritten) first, holding every publish of the
 * connection for 15-30 ms. A memory bucket is gone after a server restart: a put that fails, or the
 * worker on reconnecting, finds it missing and recreates it, and the worker refills the keys from
 * the database (refillSummaryBucket).
 */
export class SummaryBucket {
  private recreating: Promise<void> | undefined;
  private readonly listeners: Array<() => void> = [];

  private constructor(
    private readonly nc: NatsConnection,
    private readonly topology: Topology,
    private readonly storage: BucketStorage,
    private readonly replicas: number,
    private kv: KV,
  ) {}

  /** Opens the bucket, creating it with `storage` and `replicas` when missing (an existing one is kept as it is). */
  static async open(nc: NatsConnection, topology: Topology, storage: BucketStorage = 'memory', replicas = 1): Promise<SummaryBucket> {
    return new SummaryBucket(nc, topology, storage, replicas, await createBucket(nc, topology, storage, replicas));
  }

  /**
   * Stores `payload` under `key`. A put refused at once (not timed out: a slow server is not a lost
   * bucket, and the caller holds a row lock) is retried once after the bucket is made sure to exist.
   */
  async put(key: string, payload: Uint8Array): Promise<void> {
    await this.onceMoreIfLost(() => this.kv.put(key, payload));
  }

  /**
   * Stores `payload` under `key` only when the key holds nothing, so a fill from the database never
   * overwrites an entry a projection put. Resolves to false when the key was taken.
   */
  async fill(key: string, payload: Uint8Array): Promise<boolean> {
    try {
      // Not kv.create: when the bucket is gone, its fallback read waits out the request timeout.
      await this.onceMoreIfLost(() => this.kv.put(key, payload, { previousSeq: 0 }));
      return true;
    } catch (err) {
      if (isKeyTaken(err)) return false;
      throw err;
    }
  }

  /**
   * Runs `operation` (reading `this.kv` afresh each time), and once more, at once, after a refusal
   * that may mean a lost bucket: restoreIfLost runs between the two and rejects with the refusal
   * when the server cannot tell. Not after a timeout (see put), nor after "the key is taken".
   */
  private onceMoreIfLost(operation: () => Promise<unknown>): Promise<unknown> {
    const mayBeLost = (error: Error) => !(error instanceof errors.TimeoutError) && !isKeyTaken(error);
    return pRetry(operation, {
      retries: 1,
      minTimeout: 0,
      // Runs before shouldRetry and also after the last attempt, hence the budget check.
      onFailedAttempt: async ({ error, retriesLeft }) => {
        if (retriesLeft > 0 && mayBeLost(error)) await this.restoreIfLost(error);
      },
      shouldRetry: ({ error }) => mayBeLost(error),
    });
  }

  /** Keys holding a value now, and the storage the bucket actually has (an older one may differ). */
  async status(): Promise<{ values: number; storage: BucketStorage }> {
    const status = await this.kv.status();
    return { values: status.values, storage: status.streamInfo.config.storage === StorageType.Memory ? 'memory' : 'file' };
  }

  /** `listener` runs each time this process recreated the bucket after the server lost it. */
  onRecreated(listener: () => void): void {
    this.listeners.push(listener);
  }

  /**
   * Recreates the bucket if the server no longer has it (concurrent callers share one recreation).
   * Rejects with `cause` when the server cannot say. A bucket that exists may just have been
   * recreated by another replica, so the caller retries its operation once either way.
   */
  async restoreIfLost(cause?: unknown): Promise<void> {
    if (this.recreating) return this.recreating;
    // No API probe: this runs when the bus may be failing, and the info request answers that too.
    const jsm = await jetstreamManager(this.nc, { checkAPI: false });
    try {
      await jsm.streams.info(this.topology.summaryBucketStream);
      return;
    } catch (err) {
      if (!isNotFound(err)) throw cause ?? err;
    }
    this.recreating ??= (async () => {
      this.kv = await createBucket(this.nc, this.topology, this.storage, this.replicas);
      for (const listener of this.listeners) listener();
    })().finally(() => {
      this.recreating = undefined;
    });
    return this.recreating;
  }
}

function isKeyTaken(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence;
}

function createBucket(nc: NatsConnection, topology: Topology, storage: BucketStorage, replicas: number): Promise<KV> {
  return new Kvm(nc).create(topology.summaryBucket, { history: 1, replicas, storage: storage === 'memory' ? StorageType.Memory : StorageType.File });
}
