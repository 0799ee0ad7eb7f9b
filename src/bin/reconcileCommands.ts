import { reconcileTasks, toDriftPayload } from '../projectors/reconcile.js';
import { createProjectionStore } from '../repository/projection/projectionStore.js';
import { unappliedMigrations } from '../repository/migrate.js';
import { resolveSchemaMode } from '../repository/schema/schemaMode.js';
import { countTasks } from '../repository/tasks/tasks.js';
import { SqliteFileMissingError } from '../repository/database.js';
import { createQueueLifecycleOf, storesOf, withCommandParts } from './assembly.js';
import { openPromptStore, type FinishedQueue } from '../repository/prompts/promptStore.js';
import type { RepositoryContext } from '../repository/context.js';
import { openDatabase, probeDatabase } from './connectDatabase.js';
import { createProgressReporter } from './progress.js';
import { plural } from './plural.js';
import type { ReconcileSettings, VerifySettings } from './commandSettings.js';

/** `reconcile`: repair drifted summaries through the normal projection and publish each change. */
export async function runReconcileCommand(config: ReconcileSettings, taskIds: string[]): Promise<number> {
  return withCommandParts(config, 'pending-projector-reconcile', async (parts, logger) => {
    const { ctx, store, projector } = parts;
    // First the queues of finished sessions, so the summaries repaired below count them gone.
    const queues = await createQueueLifecycleOf(parts, { nc: parts.nc, config, logger });
    const settled = { queues: 0, cancelled: 0, failed: 0 };
    for (const scope of taskIds.length > 0 ? taskIds.map((taskId) => ({ taskId })) : (['all'] as const)) {
      const report = await queues.lifecycle.settle(scope);
      settled.queues += report.queues;
      settled.cancelled += report.cancelled;
      settled.failed += report.failed;
    }
    await queues.settled();
    // Said only when there was something to cancel: stdout is the command's summary.
    if (settled.cancelled > 0 || settled.failed > 0) {
      process.stdout.write(
        `cancelled ${plural(settled.cancelled, 'waiting queue entry', 'waiting queue entries')} of ${plural(settled.queues, 'finished session')}${settled.failed > 0 ? `, ${settled.failed} failed` : ''}\n`,
      );
    }
    const total = taskIds.length > 0 ? taskIds.length : await countTasks(ctx);
    const progress = createProgressReporter();
    const started = Date.now();
    const result = await reconcileTasks({
      store,
      pageSize: config.reconcilePageSize,
      taskIds: taskIds.length > 0 ? taskIds : undefined,
      repair: (taskIds) => projector.reprojectBatch(taskIds),
      onPage: (p) => {
        const rate = Math.round(p.visited / Math.max(0.001, (Date.now() - started) / 1000));
        progress.update(`reconcile: ${p.visited}/${plural(total, 'task')}, ${p.drifted} drifted, ${p.repaired} repaired, ${p.failed} failed (${rate} tasks/s)`);
      },
    });
    progress.done();
    process.stdout.write(
      `reconciled ${plural(result.visited, 'task')} in ${((Date.now() - started) / 1000).toFixed(1)} s: ${result.drifted} drifted, ${result.repaired} repaired, ${result.failed} failed\n`,
    );
    return result.failed > 0 || settled.failed > 0 ? 1 : 0;
  });
}

/**
 * `verify`: report drift without writing anything; exit 1 when any task differs. It opens the
 * database read-only (a missing SQLite file is exit 2, never created) and migrates nothing, so on a database whose schema mode still lacks this service's migrations (beside
 * Kandev's tables on PostgreSQL: the pp_json_* helpers every statement calls) it says to run
 * `migrate` and exits 2, on either dialect, instead of failing inside a statement.
 */
export async function runVerifyCommand(config: VerifySettings, taskIds: string[], json: boolean): Promise<number> {
  let db;
  try {
    db = openDatabase(config, undefined, { readOnly: true });
  } catch (err) {
    if (!(err instanceof SqliteFileMissingError)) throw err;
    process.stderr.write(`pending-projector: ${err.message}\n`);
    return 2;
  }
  await probeDatabase(db, config.databaseUrl);
  try {
    const { mode, detection } = await resolveSchemaMode(db, 'auto');
    const unapplied = unappliedMigrations(detection, mode);
    if (unapplied.length > 0) {
      process.stderr.write(
        `verify: this ${mode === 'kandev' ? 'Kandev' : 'owned'}-mode database lacks this service's migrations (${unapplied.join(', ')}): run \`pending-projector migrate\` first\n`,
      );
      return 2;
    }
    const ctx = await storesOf(db, { setting: config.timestampForm, kandevSchema: mode === 'kandev' });
    const progress = createProgressReporter();
    const total = taskIds.length > 0 ? taskIds.length : await countTasks(ctx);
    const result = await reconcileTasks({
      store: createProjectionStore(ctx),
      pageSize: config.reconcilePageSize,
      taskIds: taskIds.length > 0 ? taskIds : undefined,
      onPage: (p, drift) => {
        for (const d of drift) {
          progress.done();
          const queuedText =
            d.storedQueuedPromptCount === d.derivedQueuedPromptCount
              ? ''
              : `\tqueued_prompt_count stored=${d.storedQueuedPromptCount} derived=${d.derivedQueuedPromptCount}`;
          process.stdout.write(
            json ? `${JSON.stringify(toDriftPayload(d))}\n` : `${d.taskId}\t${d.kind}\tstored=${d.stored ?? '-'}\tderived=${d.derived ?? '-'}${queuedText}\n`,
          );
        }
        // The last page's count is the summary below: said once.
        if (p.visited < total) progress.update(`verify: ${p.visited}/${plural(total, 'task')}, ${p.drifted} drifted`);
      },
    });
    progress.done();
    const finished = await listFinishedQueuesOf(ctx, taskIds);
    for (const q of finished) {
      process.stdout.write(
        json
          ? `${JSON.stringify({ task_id: q.taskId, kind: 'finished_queue', session_id: q.sessionId, reason: q.reason, waiting: q.waiting })}\n`
          : `${q.taskId}\tfinished_queue\tsession=${q.sessionId}\treason=${q.reason}\twaiting=${q.waiting}\n`,
      );
    }
    const waiting = finished.reduce((n, q) => n + q.waiting, 0);
    process.stderr.write(
      `verified ${plural(result.visited, 'task')}: ${result.drifted} drifted` +
        (waiting > 0
          ? `; ${plural(waiting, 'queue entry', 'queue entries')} of ${plural(finished.length, 'finished session')} still waiting (reconcile cancels them)`
          : '') +
        '\n',
    );
    return result.drifted > 0 || waiting > 0 ? 1 : 0;
  } finally {
    await db.destroy();
  }
}

/** Queues of finished sessions still holding waiting entries: of the named tasks, or of every task. */
async function listFinishedQueuesOf(ctx: RepositoryContext, taskIds: string[]): Promise<FinishedQueue[]> {
  const prompts = await openPromptStore(ctx);
  if (taskIds.length === 0) return prompts.listFinishedQueues('all');
  const lists = await Promise.all(taskIds.map((taskId) => prompts.listFinishedQueues({ taskId })));
  return lists.flat();
}
