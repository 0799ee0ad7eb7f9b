import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OwnedSummaryField } from '../../src/events/statusSummary.js';
import { createForeignWriteWatch } from '../../src/projectors/foreignSummaryWrites.js';
import { projectTasks, type ProjectTasksDeps } from '../../src/projectors/projectTasks.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { compareAndSetStatusSummaries, loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { listForeignSummaryWrites, recordSummaryWrites } from '../../src/repository/projection/summaryWrites.js';
import { ownedFieldsText } from '../../src/projectors/foreignSummaryWrites.js';
import { readStatusSummariesForUpdate } from '../../src/repository/projection/statusSummaries.js';
import { judgeInspection } from '../../src/bin/doctorVerdict.js';
import { inspectDatabase } from '../../src/repository/doctor/inspectDatabase.js';
import { describeEachDialect, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { RecordingPublisher } from '../support/recordingPublisher.js';
import { seedTaskWithQuestion } from '../support/seed.js';

/** One replica of this service as the criterion sees it: its own projection deps, watch, log lines and metric. */
function replica(t: TestDatabase) {
  const lines: Array<Record<string, unknown>> = [];
  const found: OwnedSummaryField[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  const deps: ProjectTasksDeps = {
    store: createProjectionStore(t.ctx),
    publisher: new RecordingPublisher(),
    logger,
    foreignWrites: createForeignWriteWatch({ logger, onFound: (field) => found.push(field) }),
  };
  return {
    project: (taskId: string) => projectTasks(deps, [taskId]),
    found,
    warnings: () => lines.filter((l) => l.level === 40 && l.msg !== undefined && String(l.msg).includes('another writer')),
    noticed: () => lines.filter((l) => l.msg === 'summary row written by another writer'),
  };
}

describeEachDialect('a second writer of the owned summary fields, on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  /** Moves the task's derivation: a finished session owns no pending action, a running one its question. */
  const setSessionState = (sessionId: string, state: string) => t.ctx.knex('task_sessions').where({ id: sessionId }).update({ state });

  /** A stand-in for Kandev's status-summary projector: Kandev's compare-and-set at revision + 1 with `fields` replaced. */
  async function foreignWrite(taskId: string, fields: Record<string, unknown>) {
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    const summary = JSON.stringify({ ...(JSON.parse(stored.summary) as object), ...fields });
    const written = await compareAndSetStatusSummaries(t.ctx, [{ ...stored, revision: stored.revision + 1, summary }]);
    expect(written.has(taskId)).toBe(true);
    return stored.revision + 1;
  }

  it('finds nothing in the rows it wrote itself, however its derivation moves', async () => {
    const { taskId, sessionId } = await seedTaskWithQuestion(t.ctx);
    const a = replica(t);
    for (const state of ['RUNNING', 'COMPLETED', 'RUNNING']) {
      await setSessionState(sessionId, state);
      expect((await a.project(taskId)).get(taskId)!.outcome).toBe('changed');
    }
    expect(a.found).toEqual([]);
    expect(a.noticed()).toEqual([]);
  });

  it("finds nothing in another replica's newer derivation, though this replica last wrote something else", async () => {
    const { taskId, sessionId } = await seedTaskWithQuestion(t.ctx);
    const a = replica(t);
    const b = replica(t);
    await a.project(taskId); // clarification, revision 1
    await setSessionState(sessionId, 'COMPLETED');
    await b.project(taskId); // no action, revision 2: a's last write and a's next derivation both differ from it
    await setSessionState(sessionId, 'RUNNING');
    expect((await a.project(taskId)).get(taskId)).toMatchObject({ outcome: 'changed', revision: 3 });
    expect([...a.found, ...b.found]).toEqual([]);
  });

  // Only PostgreSQL lets two replicas' projections of one task overlap: SQLite serialises writers.
  if (dialect === 'postgres') {
    it("finds nothing in a replica's write it waited for on the row lock, reading the replica's record after the lock", async () => {
      const { taskId, sessionId } = await seedTaskWithQuestion(t.ctx);
      const a = replica(t);
      await a.project(taskId); // clarification, revision 1
      await setSessionState(sessionId, 'COMPLETED');
      // Replica b, mid-projection: the row locked, its compare-and-set and record written, not committed.
      const rival = await t.ctx.knex.transaction();
      const rivalPid = (await rival.raw('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const b = { ...t.ctx, knex: rival };
      const locked = (await readStatusSummariesForUpdate(b, [taskId])).get(taskId)!;
      const written = { ...locked, revision: 2, summary: '{}' };
      expect(await compareAndSetStatusSummaries(b, [written])).toEqual(new Set([taskId]));
      await recordSummaryWrites(b, [{ taskId, revision: 2, ownedFields: ownedFieldsText(written.summary) }]);
      await setSessionState(sessionId, 'RUNNING');
      const projecting = a.project(taskId);
      for (let waited = 0; ; waited += 10) {
        const rows = (await t.ctx.knex.raw('SELECT count(*)::int AS n FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))', [rivalPid])).rows;
        if (rows[0].n > 0) break;
        if (waited > 5000) throw new Error("replica a's projection never waited on replica b's row lock");
        await new Promise((r) => setTimeout(r, 10));
      }
      await rival.commit();
      expect((await projecting).get(taskId)).toMatchObject({ outcome: 'changed', revision: 3 });
      expect(a.found).toEqual([]);
    });
  }

  it('does not count a writer of the fields it does not own, nor one that wrote what is true', async () => {
    const { taskId, sessionId } = await seedTaskWithQuestion(t.ctx);
    const a = replica(t);
    await a.project(taskId);
    await foreignWrite(taskId, { git: { additions: 3 } });
    await setSessionState(sessionId, 'COMPLETED');
    await a.project(taskId);
    await setSessionState(sessionId, 'RUNNING');
    await foreignWrite(taskId, { pending_action: 'clarification' });
    expect((await a.project(taskId)).get(taskId)!.outcome).toBe('unchanged');
    expect(a.found).toEqual([]);
  });

  it('counts a foreign write of an owned field once, names the field, and keeps it for doctor, without a warning', async () => {
    const { taskId } = await seedTaskWithQuestion(t.ctx);
    const a = replica(t);
    const since = t.ctx.clock();
    await a.project(taskId);
    const revision = await foreignWrite(taskId, { queued_prompt_count: 4 });
    expect((await a.project(taskId)).get(taskId)).toMatchObject({ outcome: 'changed', revision: revision + 1 });
    expect(a.found).toEqual(['queued_prompt_count']);
    expect(a.noticed()).toEqual([
      expect.objectContaining({ taskId, revision, fields: ['queued_prompt_count'], stored: { queued_prompt_count: 4 }, derived: { queued_prompt_count: 0 } }),
    ]);
    expect(a.warnings()).toEqual([]);
    const recorded = await listForeignSummaryWrites(t.ctx, since, 5);
    expect(recorded.recent.filter((r) => r.taskId === taskId)).toEqual([
      { taskId, revision, fields: ['queued_prompt_count'], seenAt: expect.any(String), count: 1 },
    ]);
  });

  it('warns once per task per window when the foreign writes repeat, naming the fields and what to do', async () => {
    const { taskId } = await seedTaskWithQuestion(t.ctx);
    const a = replica(t);
    await a.project(taskId);
    for (let round = 0; round < 4; round++) {
      await foreignWrite(taskId, { queued_prompt_count: 1, pending_action: round % 2 ? 'permission' : null });
      await a.project(taskId);
    }
    expect(a.found.filter((f) => f === 'queued_prompt_count')).toHaveLength(4);
    expect(a.found.filter((f) => f === 'pending_action')).toHaveLength(4);
    const warnings = a.warnings();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ taskId, fields: ['pending_action', 'queued_prompt_count'], times: 2 });
    expect(String(warnings[0]!.msg)).toMatch(/another writer keeps writing pending_action and queued_prompt_count .*docs\/kandev\.md#one-owner-per-field/);
    const recorded = await listForeignSummaryWrites(t.ctx, '1970-01-01T00:00:00.000000000Z', 100);
    expect(recorded.recent.find((r) => r.taskId === taskId)).toMatchObject({ count: 4, fields: ['pending_action', 'queued_prompt_count'] });
  });

  it('has doctor report the tasks whose rows another writer wrote, newest first, as a warning', async () => {
    const { taskId } = await seedTaskWithQuestion(t.ctx);
    const a = replica(t);
    await a.project(taskId);
    await foreignWrite(taskId, { pending_action: 'permission' });
    await a.project(taskId);
    const inspection = await inspectDatabase(t.db, { schemaMode: 'auto', sampleRows: 10 });
    expect(inspection.foreignWrites!.tasks).toBeGreaterThanOrEqual(1);
    expect(inspection.foreignWrites!.examples[0]).toMatchObject({ taskId, fields: ['pending_action'], count: 1 });
    const verdict = judgeInspection(inspection);
    expect(verdict).toMatchObject({ exitCode: 1, status: 'warnings' });
    expect(verdict.warnings.find((w) => w.check === 'foreign_writes')?.message).toMatch(
      new RegExp(`written by another writer in the last 24 hours.*${taskId} \\(pending_action, revision \\d+, 1 time in all\\).*one-owner-per-field`),
    );
  });

  it("has doctor say it could not read them beside Kandev's tables before this service's migrations ran", async () => {
    const kandev = await openKandevDatabase(dialect);
    try {
      expect((await inspectDatabase(kandev.db, { schemaMode: 'auto', sampleRows: 10 })).foreignWrites).toBeNull();
    } finally {
      await kandev.close();
    }
  });
});

describe('the foreign write window', () => {
  it('warns again after the window, and forgets the least recently seen task past its cap', () => {
    let now = 0;
    const warned: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => warned.push((JSON.parse(line) as { taskId: string }).taskId) });
    const watch = createForeignWriteWatch({ logger, windowMs: 1000, repeats: 2, maxTasks: 2, now: () => now });
    const finding = (taskId: string) => ({
      taskId,
      revision: 1,
      changes: [{ field: 'pending_action' as const, stored: null, lastWritten: 'permission', derived: 'permission' }],
    });
    watch.observe(finding('a'));
    watch.observe(finding('a'));
    watch.observe(finding('a'));
    expect(warned).toEqual(['a']);
    now = 1000;
    watch.observe(finding('a'));
    watch.observe(finding('a'));
    expect(warned).toEqual(['a', 'a']);
    watch.observe(finding('b'));
    watch.observe(finding('c')); // a is forgotten: its window starts over
    watch.observe(finding('a'));
    expect(warned).toEqual(['a', 'a']);
    watch.observe(finding('a'));
    expect(warned).toEqual(['a', 'a', 'a']);
  });
});
