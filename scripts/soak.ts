/**
 * `npm run soak -- --minutes N --seed S [--tasks T]`: a randomized fault soak of two worker replicas
 * on a private nats-server and the machine's PostgreSQL. For N minutes it drives random task
 * histories and user requests while it kills and restarts replicas, restarts nats-server,
 * terminates the workers' database backends and publishes duplicate and reordered events, all on
 * a schedule drawn from S; it watches that no summary revision goes backwards on the bus; then it
 * waits for quiescence and checks every summary, answer, prompt and comment (scripts/soak/).
 * Exit 0: every check passed; 1: a check failed (named, with task ids); 2: it could not set up.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { openScratchDatabase, type ScratchDatabase } from '../bench/scratchDatabase.js';
import { createPendingProjectorClient } from '../src/client/pendingProjectorClient.js';
import { topologyFor } from '../src/contract/subjects.js';
import { canConnect, POSTGRES_URL } from '../test/support/services.js';
import { createBackendEvents } from './soak/backendEvents.js';
import { createFaultInjector } from './soak/faultInjector.js';
import { runFinalChecks } from './soak/finalChecks.js';
import { waitForQuiescence } from './soak/quiescence.js';
import { findNatsServer, startRestartableNats, type RestartableNats } from './soak/restartableNats.js';
import { startRevisionMonitor } from './soak/revisionMonitor.js';
import { seededStream } from './soak/seededRandom.js';
import { startSoakAgents } from './soak/soakAgents.js';
import { createSoakLedger } from './soak/soakLedger.js';
import { createTaskHistories } from './soak/taskHistories.js';
import { createUserActions } from './soak/userActions.js';
import { startWorkerReplicas, type WorkerReplicas } from './soak/workerReplicas.js';

const USAGE = 'usage: npm run soak -- --minutes N (fractional ok) --seed S (integer) [--tasks T (default 24)]';

function parseFlags(argv: string[]): { minutes: number; seed: number; tasks: number } {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]!;
    if (name === '--help' || name === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    if (!name.startsWith('--') || argv[i + 1] === undefined) throw new Error(`unexpected argument ${name}`);
    flags.set(name.slice(2), argv[++i]!);
  }
  for (const name of flags.keys()) if (!['minutes', 'seed', 'tasks'].includes(name)) throw new Error(`unknown flag --${name}`);
  const minutes = Number(flags.get('minutes') ?? '1');
  const seed = Number(flags.get('seed') ?? String(Date.now() % 100_000));
  const tasks = Number(flags.get('tasks') ?? '24');
  if (!(minutes > 0 && minutes <= 24 * 60)) throw new Error('--minutes must be a number above 0');
  if (!Number.isSafeInteger(seed)) throw new Error('--seed must be an integer');
  if (!Number.isSafeInteger(tasks) || tasks < 1 || tasks > 1000) throw new Error('--tasks must be an integer from 1 to 1000');
  return { minutes, seed, tasks };
}

const startedAt = Date.now();
const elapsed = () => `${((Date.now() - startedAt) / 1000).toFixed(0).padStart(4)} s`;
const say = (line: string) => process.stdout.write(`[soak ${elapsed()}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** What the soak needs is missing: one line, exit 2, after removing what was already set up. */
class SetupFailure extends Error {
  override name = 'SetupFailure';
}
const setupFailure = (message: string): never => {
  throw new SetupFailure(message);
};

let options: ReturnType<typeof parseFlags>;
try {
  options = parseFlags(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`soak: ${(err as Error).message}\n${USAGE}\n`);
  process.exit(2);
}
const { minutes, seed, tasks: taskCount } = options;

say(`seed ${seed}, ${minutes} min, ${taskCount} tasks; rerun with: npm run soak -- --minutes ${minutes} --seed ${seed} --tasks ${taskCount}`);
const prefix = 'soak.';
const topology = topologyFor(prefix);
const appPrefix = `pp-soak-${process.pid}-w`;
const cleanups: Array<() => Promise<unknown>> = [];
let database: ScratchDatabase | undefined;
let nats: RestartableNats | undefined;
let replicas: WorkerReplicas | undefined;
let stopRequested = false;
// Whatever ends this process, the servers and workers it started end with it.
process.on('exit', () => {
  replicas?.killNow();
  nats?.killNow();
});
process.on('SIGINT', () => {
  say('SIGINT: ending the run early, then checking');
  stopRequested = true;
});

let exitCode = 2;
try {
  const natsBinary = findNatsServer() ?? setupFailure('nats-server is not installed (apt-get install nats-server, or set NATS_SERVER_BIN)');
  if (!(await canConnect(POSTGRES_URL, 5432))) setupFailure(`PostgreSQL does not answer at ${new URL(POSTGRES_URL).host} (set POSTGRES_URL)`);
  database = await openScratchDatabase('postgres', { postgresUrl: POSTGRES_URL, schemaPrefix: 'soak_', maxConnections: 6 }).catch((err: Error) =>
    setupFailure(`PostgreSQL at ${POSTGRES_URL}: ${err.message}`),
  );
  const { ctx } = database;
  nats = await startRestartableNats(natsBinary).catch((err: Error) => setupFailure(`nats-server: ${err.message.split('\n')[0]}`));
  const nc = await connect({ servers: nats.url, name: 'pending-projector-soak', maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  cleanups.push(() => nc.close());
  say(`database schema ${database.searchPath}, nats-server ${nats.url}`);
  replicas = await startWorkerReplicas({
    count: 2,
    databaseUrl: database.url,
    natsUrl: nats.url,
    prefix,
    appPrefix,
    // Deadlines shorter than the defaults, so a claim or a reservation a killed replica left behind
    // is recovered within the run rather than after it.
    env: {
      LOG_LEVEL: 'info',
      RESPOND_DEADLINE_MS: '5000',
      PROMPT_DEADLINE_MS: '5000',
      RESERVATION_TTL_MS: '6000',
      DISPATCH_POLL_MS: '500',
      QUEUE_MAX_PER_SESSION: '6',
    },
  }).catch((err: Error) => setupFailure(`the worker did not start: ${err.message.slice(0, 2000)}`));
  say('2 worker replicas started');

  const monitor = await startRevisionMonitor(nc, topology);
  cleanups.push(async () => monitor.stop());
  const ledger = createSoakLedger();
  const events = createBackendEvents(nc, prefix, seededStream(seed, 1), { duplicateRate: 0.05, reorderRate: 0.05 });
  const agents = startSoakAgents(nc, topology, ctx, events, seededStream(seed, 2));
  cleanups.push(async () => agents.stop());
  const histories = createTaskHistories(ctx, events, seededStream(seed, 3), ledger, (sessionId) => agents.wait(sessionId));
  const client = createPendingProjectorClient(nc, { prefix, timeoutMs: 15_000, respondTimeoutMs: 20_000 });
  const users = createUserActions(client, ctx, seededStream(seed, 4), ledger);
  const moreUsers = createUserActions(client, ctx, seededStream(seed, 5), ledger);
  for (let i = 0; i < taskCount; i++) await histories.addTask();
  say(`${taskCount} tasks seeded; running`);

  const runUntil = Date.now() + minutes * 60_000;
  const running = () => !stopRequested && Date.now() < runUntil;
  const errors = new Map<string, number>();
  const loop = async (name: string, body: () => Promise<void>, gapMs: [number, number], random = seededStream(seed, 6 + gapMs[0])) => {
    while (running()) {
      try {
        await body();
      } catch (err) {
        // The workload's own writes and requests may fail while the bus restarts; the checks judge the outcome.
        const key = `${name}: ${(err as Error).message.split('\n')[0]!.slice(0, 80)}`;
        errors.set(key, (errors.get(key) ?? 0) + 1);
      }
      await sleep(random.int(...gapMs));
    }
  };
  const faultCount = () => [...ledger.faults].map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const actionCount = (prefixOf: string) => [...ledger.actions].filter(([k]) => k.startsWith(prefixOf)).reduce((sum, [, v]) => sum + v.ok, 0);
  // The workers' lag (events not yet delivered to them) tells a stalled worker from a stalled watcher.
  const lag = async () => {
    try {
      const info = await (await jetstreamManager(nc, { timeout: 2000 })).consumers.info(topology.eventsStream, topology.consumer);
      return String(info.num_pending + info.num_ack_pending);
    } catch {
      return '?';
    }
  };
  const progress = setInterval(async () => {
    say(
      `${events.counts.events} events (${events.counts.duplicates} duplicated, ${events.counts.reordered} reordered, lag ${await lag()}), faults: ${faultCount()}, ` +
        `${monitor.counts.published} summaries, ${ledger.promptsAccepted.size} prompts accepted, ${ledger.answersClaimed.size} answers, ${actionCount('history.')} history steps`,
    );
  }, 10_000);
  const faults = createFaultInjector({ random: seededStream(seed, 0), ledger, replicas, nats, ctx, appPrefix, meanGapMs: 8000, onFault: say });
  await Promise.all([
    loop('history', () => histories.step(), [40, 160]),
    loop('user', () => users.act(), [60, 240]),
    loop('user', () => moreUsers.act(), [61, 240]),
    faults.run(() => !running()),
  ]);
  clearInterval(progress);
  for (let i = 0; i < replicas.count; i++) await replicas.restart(i);
  say(`workload stopped; waiting for quiescence`);
  const notQuiet = await waitForQuiescence({ ctx, nc, topology, events, monitor, ledger, answerPending: (id) => users.answerPending(id), timeoutMs: 120_000 });
  const checks = await runFinalChecks({ ctx, nc, topology, databaseUrl: database.url, ledger, monitor, agents });
  if (notQuiet) checks.unshift({ name: 'the workers went quiet within 120 s', failures: [notQuiet], figures: '' });
  const crashes = replicas.unexpectedExits();
  if (crashes.length) checks.unshift({ name: 'no replica exited unless killed', failures: crashes, figures: '' });

  say('--- report ---');
  say(`seed ${seed}, ${minutes} min, ${taskCount} tasks (${ledger.tasks.filter((t) => t.deleted).length} deleted and replaced)`);
  say(`events published: ${events.counts.events} (${events.counts.duplicates} duplicates, ${events.counts.reordered} reordered)`);
  say(`faults injected: ${faultCount()}`);
  say(`projections published: ${monitor.counts.published} summaries (${monitor.counts.duplicates} repeats of a revision)`);
  say(`actions: ${[...ledger.actions].map(([k, v]) => `${k} ${v.ok}${v.refused ? `/${v.refused} refused` : ''}`).join(', ')}`);
  if (errors.size) say(`workload errors (the bus or a replica was down): ${[...errors].map(([k, n]) => `${k} x${n}`).join('; ')}`);
  for (const check of checks) {
    say(`${check.failures.length ? 'FAIL' : 'ok  '} ${check.name}${check.figures ? `: ${check.figures}` : ''}`);
    for (const failure of check.failures) say(`       ${failure}`);
  }
  const failed = checks.filter((c) => c.failures.length > 0);
  say(failed.length ? `verdict: FAIL (${failed.length} of ${checks.length} checks; rerun with --seed ${seed})` : `verdict: PASS (${checks.length} checks)`);
  exitCode = failed.length ? 1 : 0;
} catch (err) {
  if (err instanceof SetupFailure) process.stderr.write(`soak: cannot set up: ${err.message}\n`);
  else process.stderr.write(`soak: stopped by an error: ${(err as Error).stack ?? String(err)}\n`);
  exitCode = 2;
} finally {
  await replicas?.stopAll().catch(() => undefined);
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
  await nats?.stop().catch(() => undefined);
  await database?.drop().catch(() => undefined);
}
process.exit(exitCode);
