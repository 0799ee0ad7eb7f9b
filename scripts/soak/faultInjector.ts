import type { RepositoryContext } from '../../src/repository/context.js';
import type { RestartableNats } from './restartableNats.js';
import type { SeededRandom } from './seededRandom.js';
import type { SoakLedger } from './soakLedger.js';
import type { WorkerReplicas } from './workerReplicas.js';

/**
 * The process-level faults, one at a time on a random schedule: kill -9 a replica and start it
 * again a moment later, restart nats-server (same port, same store), and terminate every
 * PostgreSQL backend of the workers (by their application_name; the soak's own pool is left alone).
 * The bus-level faults (duplicate and reordered events) are backendEvents.ts's.
 */
export interface FaultInjector {
  /** Injects faults until `until()` says stop; resolves once the last one has been undone. */
  run(until: () => boolean): Promise<void>;
}

const FAULTS = { killReplica: 4, restartNats: 2, terminateBackends: 3 } as const;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createFaultInjector(deps: {
  random: SeededRandom;
  ledger: SoakLedger;
  replicas: WorkerReplicas;
  nats: RestartableNats;
  ctx: RepositoryContext;
  appPrefix: string;
  /** The mean gap between two faults. */
  meanGapMs: number;
  /** Told of each fault once injected (and undone), for the log. */
  onFault: (line: string) => void;
}): FaultInjector {
  const { random, ledger, replicas, nats, ctx } = deps;
  const inject = {
    async killReplica() {
      const index = random.int(0, replicas.count - 1);
      await replicas.kill9(index);
      await sleep(random.int(300, 3000));
      await replicas.restart(index);
    },
    async restartNats() {
      await nats.restart();
    },
    async terminateBackends() {
      await ctx.knex.raw(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE ?`, [`${deps.appPrefix}%`]);
    },
  };
  return {
    async run(until) {
      // A short calm start, so the first faults land on a running workload.
      await sleep(random.int(deps.meanGapMs / 4, deps.meanGapMs / 2));
      while (!until()) {
        const kind = random.weighted(FAULTS);
        const started = Date.now();
        await inject[kind]();
        ledger.fault(kind);
        deps.onFault(`fault: ${kind} (${Date.now() - started} ms)`);
        const gapEnd = Date.now() + random.int(deps.meanGapMs / 2, (deps.meanGapMs * 3) / 2);
        while (!until() && Date.now() < gapEnd) await sleep(100);
      }
    },
  };
}
