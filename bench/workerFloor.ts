/**
 * The floor of (2): the worker's work with nothing but the drivers and the bus. It pulls each event
 * from a durable consumer made exactly as the worker's (ensureTopology, on a topology of its own so
 * the worker under test sees none of its events), takes the tasks waiting into one transaction of at
 * most the worker's batch size, runs the statements a projection runs (the repository functions the
 * projection store calls: summary rows locked, pending states with the queued prompt count, the
 * record of summary writes read and upserted, the compare-and-set), publishes each replacement with
 * its dedupe id and puts it in the KV bucket under the row locks, commits, publishes the sessions'
 * changed pending actions and acks. The projector's own limits hold (projectionCapacity: tasks per
 * transaction, transactions at once, tasks in flight; on PostgreSQL the next transaction starts
 * beside a COMMIT). Left out is what the worker adds around that work: event validation and
 * relevance, the keyed coalescer, conflict rereads, revision bumps, metrics and logging.
 */
import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JsMsg } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { Logger } from 'pino';
import { createEnvelope } from '../src/contract/envelope.js';
import { SESSION_PENDING_ACTION_CHANGED, SUMMARY_UPDATED, type Topology } from '../src/contract/subjects.js';
import { summaryKey } from '../src/events/natsTopology.js';
import { decideNextSummary, type SummaryChange } from '../src/projectors/decideNextSummary.js';
import { ownedFieldsText } from '../src/projectors/foreignSummaryWrites.js';
import { beginOrJoin, type RepositoryContext } from '../src/repository/context.js';
import { loadTaskPendingStates } from '../src/repository/projection/pendingActions.js';
import { compareAndSetStatusSummaries, readStatusSummariesForUpdate } from '../src/repository/projection/statusSummaries.js';
import { readSummaryWrites, recordSummaryWrites } from '../src/repository/projection/summaryWrites.js';
import { detectQueuedPromptTables } from '../src/repository/schema/queueTables.js';
import type { WorkerConfig } from '../src/bin/worker.js';
import { ensureTopology } from '../src/events/natsTopology.js';
import { topologyFor } from '../src/contract/subjects.js';
import { projectionCapacity } from '../src/projectors/projectionCapacity.js';
import { WrongAnswerError, onCleanup } from './harness.js';
import { deleteTopology, SummaryWatcher } from './bus.js';
import type { BenchEnv } from './workerPhases.js';

interface FloorDeps {
  ctx: RepositoryContext;
  /** A connection of the floor's own, as the worker has. */
  nc: NatsConnection;
  /** Made by ensureTopology with the worker's settings. */
  topology: Topology;
  capacity: ReturnType<typeof projectionCapacity>;
  logger: Logger;
}

export interface Floor {
  /** Events acked so far; rejects once a batch failed (the run stops, its figures would mean nothing). */
  settled(): Promise<number>;
  stop(): Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const json = (value: unknown) => encoder.encode(JSON.stringify(value));

async function startFloor(deps: FloorDeps): Promise<Floor> {
  const { ctx, topology, capacity } = deps;
  const js = jetstream(deps.nc);
  const kv = await new Kvm(js).open(topology.summaryBucket);
  const queue = await detectQueuedPromptTables(ctx);
  const messages = await (await js.consumers.get(topology.eventsStream, topology.consumer)).consume({ max_messages: 256 });
  const epoch = randomUUID();
  const lastSessionAction = new Map<string, string | null>();
  const waiting: Array<{ m: JsMsg; taskId: string }> = [];
  let sequence = 0;
  let settled = 0;
  let tasksInFlight = 0;
  let failure: unknown;
  let stopping = false;
  let waiters: Array<() => void> = [];
  const changed = () => new Promise<void>((resolve) => waiters.push(resolve));
  const wake = () => {
    const woken = waiters;
    waiters = [];
    for (const resolve of woken) resolve();
  };

  const publishSummary = async ({ update }: SummaryChange) => {
    const payload = json(
      createEnvelope(
        SUMMARY_UPDATED,
        topology.summarySubject,
        { task_id: update.taskId, workspace_id: update.workspaceId, status_summary: update.summary },
        randomUUID(),
        ctx.clock(),
      ),
    );
    const h = headers();
    h.set('Pending-Projector-Task-Id', update.taskId);
    h.set('Pending-Projector-Revision', String(update.summary.revision));
    const ack = await js.publish(topology.summarySubject, payload, { msgID: `${update.taskId}:${update.summary.revision}`, headers: h });
    if (ack.duplicate) throw new WrongAnswerError(`floor: the stream already held ${update.taskId}:${update.summary.revision}`);
    await kv.put(summaryKey(update.taskId), payload);
  };

  /** One transaction over the batch's tasks; `release` lets the next one start (before COMMIT where the dialect allows). */
  const project = async (taskIds: readonly string[], release: () => void) => {
    const seq = ++sequence;
    const states = await beginOrJoin(ctx, async (tx) => {
      const stored = await readStatusSummariesForUpdate(tx, taskIds);
      const states = await loadTaskPendingStates(tx, taskIds, queue);
      const now = tx.clock();
      if (states.size !== taskIds.length) throw new WrongAnswerError(`floor: ${states.size} of ${taskIds.length} tasks found`);
      const changes = taskIds.flatMap((taskId) => {
        const decision = decideNextSummary(deps.logger, now, stored.get(taskId), states.get(taskId)!);
        return decision.outcome === 'changed' ? [decision] : [];
      });
      const rewritten = changes.filter((c) => stored.has(c.row.taskId)).map((c) => c.row.taskId);
      if (rewritten.length > 0) await readSummaryWrites(tx, rewritten);
      const written = await compareAndSetStatusSummaries(
        tx,
        changes.map((c) => c.row),
      );
      if (written.size !== taskIds.length) throw new WrongAnswerError(`floor: ${written.size} of ${taskIds.length} changed tasks written`);
      await Promise.all(changes.map(publishSummary));
      await recordSummaryWrites(
        tx,
        changes.map((c) => ({ taskId: c.row.taskId, revision: c.row.revision, ownedFields: ownedFieldsText(c.row.summary) })),
      );
      if (ctx.dialect.releasesSlotBeforeCommit) release();
      return states;
    });
    release();
    const sessions = [...states.values()].flatMap((state) =>
      state.sessions.filter((s) => !(lastSessionAction.has(s.sessionId) && lastSessionAction.get(s.sessionId) === s.pendingAction)).map((s) => ({ state, s })),
    );
    await Promise.all(
      sessions.map(({ state, s }) => {
        lastSessionAction.set(s.sessionId, s.pendingAction);
        const data = {
          workspace_id: state.workspaceId,
          task_id: state.taskId,
          session_id: s.sessionId,
          pending_action: s.pendingAction,
          pending_action_revision: { epoch, sequence: seq },
        };
        return js.publish(
          topology.sessionPendingSubject,
          json(createEnvelope(SESSION_PENDING_ACTION_CHANGED, topology.sessionPendingSubject, data, randomUUID(), ctx.clock())),
        );
      }),
    );
  };

  const pulling = (async () => {
    for await (const m of messages) {
      const event = JSON.parse(decoder.decode(m.data)) as { data: { task_id: string } };
      waiting.push({ m, taskId: event.data.task_id });
      wake();
    }
  })();

  // The projector's transaction slots, each taking the tasks waiting, at most `tasksInFlight` tasks
  // between the pull and their acks.
  const slot = async () => {
    while (!stopping) {
      if (waiting.length === 0 || tasksInFlight + Math.min(waiting.length, capacity.batchSize) > capacity.tasksInFlight) {
        await changed();
        continue;
      }
      const batch: typeof waiting = [];
      const tasks = new Set<string>();
      while (waiting.length > 0 && (tasks.size < capacity.batchSize || tasks.has(waiting[0]!.taskId))) {
        const next = waiting.shift()!;
        tasks.add(next.taskId);
        batch.push(next);
      }
      tasksInFlight += tasks.size;
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const done = project([...tasks], release)
        .then(() => {
          for (const { m } of batch) m.ack();
          settled += batch.length;
        })
        .catch((err: unknown) => {
          failure ??= err;
          release();
        })
        .finally(() => {
          tasksInFlight -= tasks.size;
          wake();
        });
      await Promise.race([released, done]);
    }
  };
  const slots = Promise.all(Array.from({ length: capacity.transactions }, slot));

  return {
    settled: async () => {
      if (failure) throw failure;
      return settled;
    },
    stop: async () => {
      stopping = true;
      wake();
      await messages.close().catch(() => undefined);
      await pulling;
      await slots;
      while (tasksInFlight > 0) await changed();
      for (const { m } of waiting.splice(0)) m.nak();
    },
  };
}

/**
 * The floor beside the worker under test: its topology (the worker's prefix + `_floor`), made as the
 * worker makes its own, its connection, its summary watcher and the floor itself, all removed at the
 * end. Returns the bench environment that publishes to it and the floor's settled-event counter.
 */
export async function openFloor(
  env: BenchEnv,
  nc: NatsConnection,
  config: WorkerConfig,
  connections: number,
): Promise<{ env: BenchEnv; settled: () => Promise<number> }> {
  const topology = topologyFor(`${env.topology.prefix.slice(0, -1)}_floor.`);
  onCleanup(() => deleteTopology(env.nc, topology));
  await ensureTopology(nc, { topology, streamMaxAgeMs: config.streamMaxAgeMs, maxDeliver: config.maxDeliver, ackWaitMs: config.ackWaitMs });
  const watcher = new SummaryWatcher(env.nc, topology);
  onCleanup(async () => watcher.stop());
  const capacity = projectionCapacity({
    batchSize: config.projectionBatchSize,
    transactions: config.projectionTransactions,
    connections,
    singleWriter: env.ctx.dialect.singleWriter,
  });
  const floor = await startFloor({ ctx: env.ctx, nc, topology, capacity, logger: env.logger });
  onCleanup(() => floor.stop());
  return { env: { ...env, topology, watcher, worker: undefined }, settled: floor.settled };
}
