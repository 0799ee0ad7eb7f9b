import type { Logger } from 'pino';
import { periodic } from '../../background/periodic.js';
import { partitionConsumerName, partitionLeaseName, partitionMemberLeasePrefix, planPartitions } from '../../contract/eventPartitions.js';
import { EventConsumer, type EventConsumerOptions } from '../../events/natsEventConsumer.js';
import type { RepositoryContext } from '../../repository/context.js';
import { acquireLease, listLiveLeases, releaseLease } from '../../repository/projection/leases.js';
import type { WorkerComponent } from './component.js';

/** Sessions whose task is remembered for the partition rule (a session never changes task). */
const SESSION_TASKS_CACHED = 10_000;

export interface EventConsumptionDeps {
  /** What every consumer of this replica shares; the consumer name and partition are set here. */
  consumer: Omit<EventConsumerOptions, 'consumerName' | 'partition'>;
  /** EVENT_PARTITIONS: 1 pulls the shared durable consumer. */
  partitions: number;
  /** EVENT_PARTITION_LEASE_MS: renewed every third of it. */
  leaseMs: number;
  ctx: RepositoryContext;
  /** This replica's name in the lease table (host, pid and a random part: an operator can tell who holds what). */
  owner: string;
  taskOfSession(sessionId: string): Promise<string | undefined>;
  logger: Logger;
}

/** The worker's event intake: one shared consumer, or the partitions this replica holds. */
export interface EventConsumption extends WorkerComponent {
  /** Milliseconds since an event was last settled by any consumer pulled here; 0 when none is pulled. */
  readonly idleForMs: number;
  readonly unsettled: number;
  /** The partitions this replica pulls now (empty with EVENT_PARTITIONS = 1). */
  readonly heldPartitions: number[];
}

/** A session-to-task lookup that remembers its answers (bounded, oldest forgotten first). */
function cachedTaskOfSession(lookup: (sessionId: string) => Promise<string | undefined>): (sessionId: string) => Promise<string | undefined> {
  const known = new Map<string, string>();
  return async (sessionId) => {
    const hit = known.get(sessionId);
    if (hit !== undefined) return hit;
    const taskId = await lookup(sessionId);
    if (taskId !== undefined) {
      if (known.size >= SESSION_TASKS_CACHED) known.delete(known.keys().next().value!);
      known.set(sessionId, taskId);
    }
    return taskId;
  };
}

/**
 * With one partition, the shared durable consumer as before. With P, a lease loop: every third of
 * the lease, renew this replica's membership and its partitions' leases, give up the partitions
 * above its share (planPartitions) and claim free or expired ones up to it, starting or stopping
 * each partition's consumer. A partition whose lease was lost (this replica stalled past it and
 * another took over) is stopped at once. Exclusivity is only for efficiency: two replicas pulling
 * one partition for a moment both project by compare-and-set (ADR 0020).
 */
export function eventConsumptionComponent(deps: EventConsumptionDeps): EventConsumption {
  if (deps.partitions <= 1) {
    const consumer = new EventConsumer(deps.consumer);
    return {
      name: 'event-consumer',
      start: () => consumer.start(),
      stop: () => consumer.stop(),
      get idleForMs() {
        return consumer.idleForMs;
      },
      get unsettled() {
        return consumer.unsettled;
      },
      heldPartitions: [],
    };
  }
  const { ctx, owner, partitions, leaseMs } = deps;
  const log = deps.logger.child({ component: 'event-partitions' });
  const taskOfSession = cachedTaskOfSession(deps.taskOfSession);
  const held = new Map<number, { consumer: EventConsumer; renewedAt: number }>();
  // Every replica renews one of these while it runs: the count the balance divides by.
  const members = partitionMemberLeasePrefix(deps.consumer.topology);
  const memberLease = `${members}${owner}`;
  const leaseOf = (k: number) => partitionLeaseName(deps.consumer.topology, k, partitions);

  const drop = async (k: number, why: string) => {
    const entry = held.get(k);
    if (!entry) return;
    held.delete(k);
    await entry.consumer.stop();
    log.info({ partition: k, partitions, why }, 'stopped pulling an event partition');
  };
  const claim = async (k: number) => {
    if (!(await acquireLease(ctx, leaseOf(k), owner, leaseMs))) return false;
    const consumer = new EventConsumer({
      ...deps.consumer,
      consumerName: partitionConsumerName(deps.consumer.topology, k, partitions),
      partition: { index: k, count: partitions, taskOfSession },
    });
    try {
      await consumer.start();
    } catch (err) {
      await releaseLease(ctx, leaseOf(k), owner).catch(() => undefined);
      throw err;
    }
    held.set(k, { consumer, renewedAt: Date.now() });
    log.info({ partition: k, partitions }, 'pulling an event partition');
    return true;
  };

  const tick = async () => {
    await acquireLease(ctx, memberLease, owner, leaseMs);
    for (const [k, entry] of held) {
      if (await acquireLease(ctx, leaseOf(k), owner, leaseMs)) entry.renewedAt = Date.now();
      else await drop(k, 'its lease passed to another replica');
    }
    const live = new Set((await listLiveLeases(ctx, members)).map((lease) => lease.owner)).size;
    const plan = planPartitions(partitions, live, [...held.keys()]);
    for (const k of plan.release) {
      await drop(k, `balancing across ${live} replicas`);
      await releaseLease(ctx, leaseOf(k), owner);
    }
    for (let k = 0, wanted = plan.claim; k < partitions && wanted > 0; k++) if (!held.has(k) && (await claim(k))) wanted--;
  };
  const loop = periodic({
    intervalMs: Math.max(100, Math.floor(leaseMs / 3)),
    firstRun: 'at-start',
    logger: log,
    failureMessage: 'could not renew or claim the event partitions; trying again',
    failureLevel: 'warn',
    run: async () => {
      try {
        await tick();
      } finally {
        // A renewal failing (the database away) for a whole lease: another replica may hold the
        // partition by now, so stop pulling it rather than project beside it indefinitely.
        for (const [k, entry] of held) if (Date.now() - entry.renewedAt >= leaseMs) await drop(k, 'its lease could not be renewed');
      }
    },
  });

  return {
    name: 'event-consumer',
    start: () => loop.start(),
    async stop() {
      await loop.stop();
      for (const k of [...held.keys()]) {
        await drop(k, 'the worker stops');
        // Released at once, so another replica takes the partition on its next tick, not after the lease.
        await releaseLease(ctx, leaseOf(k), owner).catch((err: unknown) => log.warn({ err, partition: k }, 'could not release an event partition'));
      }
      await releaseLease(ctx, memberLease, owner).catch(() => undefined);
    },
    get idleForMs() {
      const idle = [...held.values()].map((entry) => entry.consumer.idleForMs);
      return idle.length === 0 ? 0 : Math.min(...idle);
    },
    get unsettled() {
      return [...held.values()].reduce((sum, entry) => sum + entry.consumer.unsettled, 0);
    },
    get heldPartitions() {
      return [...held.keys()].sort((a, b) => a - b);
    },
  };
}
