import { randomUUID } from 'node:crypto';
import { afterEach, expect, it } from 'vitest';
import * as migration0004 from '../../migrations/0004_task_plan_comments_and_prompt_receipts.js';
import * as migration0005 from '../../migrations/0005_queue_management.js';
import { rawRows } from '../../src/repository/context.js';
import { migrateSchema } from '../../src/repository/migrate.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA, detectPlanCommentSchema } from '../../src/repository/schema/planCommentTables.js';
import { catalogChanges, catalogSnapshot } from '../support/catalog.js';
import { describeEachDialect, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createKandevPlanTables } from '../support/kandevPlanSchema.js';
import { openOwnedStore, seedPlanTask } from '../support/planComments.js';
import { createSession, createTask } from '../../src/repository/tasks/tasks.js';

const PLAN_TABLES = ['task_plans', 'task_plan_comments', 'task_plan_comment_admissions'];

describeEachDialect('plan-comment tables by schema mode on %s', (dialect) => {
  const opened: TestDatabase[] = [];
  const open = async (database: Promise<TestDatabase>) => {
    const t = await database;
    opened.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  it('owned mode: 0004 and 0005 give every table, receipts on queued_messages, and their down() removes exactly what their up() made', async () => {
    const t = await open(openTestDatabase(dialect));
    expect(await detectPlanCommentSchema(t.db)).toEqual(COMPLETE_PLAN_COMMENT_SCHEMA);
    const withTables = await catalogSnapshot(t);
    await t.db.knex.transaction(async (trx) => {
      await migration0005.down(trx);
      await migration0004.down(trx);
    });
    const without = await catalogSnapshot(t);
    const removed = catalogChanges(withTables, without);
    expect(removed.added).toEqual([]);
    expect(removed.changed).toEqual([]);
    for (const table of [
      ...PLAN_TABLES,
      'queued_messages',
      'queue_session_locks',
      'queue_session_state',
      'task_session_prompt_seq',
      'task_message_attachments',
      'pending_projector_queue_revisions',
      'pending_projector_prompt_outcomes',
    ]) {
      expect(await t.db.knex.schema.hasTable(table)).toBe(false);
    }
    await t.db.knex.transaction(async (trx) => {
      await migration0004.up(trx);
      await migration0005.up(trx);
    });
    expect(catalogChanges(withTables, await catalogSnapshot(t))).toEqual({ added: [], changed: [], removed: [] });
  });

  it("beside Kandev's older schema: the plan-comment and attachment features answer unavailable, naming the tables; plain prompts go to our own receipt table", async () => {
    const t = await open(openKandevDatabase(dialect));
    await migrateSchema(t.db);
    const store = await openOwnedStore(t.ctx);
    expect(store.schema).toEqual({
      missingForComments: PLAN_TABLES,
      missingForAttachments: ['task_message_attachments'],
      missingForPrompts: [],
      receiptTable: 'pending_projector_prompt_receipts',
      // That schema has no queue_session_state: its queues cannot be paused.
      queueState: false,
      kandevOwnsPlans: true,
    });
    const task = await createTask(t.ctx, { workspaceId: 'ws' });
    const session = await createSession(t.ctx, { taskId: task.id, state: 'IDLE', isPrimary: true });
    const missingPlans = { ok: false, code: 'unavailable', reason: 'tables_missing', missing: PLAN_TABLES };
    expect(await store.getSnapshot(task.id)).toMatchObject(missingPlans);
    expect(await store.createComment({ taskId: task.id, planId: 'p', commentId: 'c', body: 'x' })).toMatchObject(missingPlans);
    expect(await store.importLegacy({ taskId: task.id, drafts: [] })).toMatchObject(missingPlans);
    expect(await store.deletePlan({ taskId: task.id, planId: 'p' })).toMatchObject(missingPlans);
    const unavailable = await store.acceptPrompt({
      callerId: randomUUID(),
      target: { kind: 'session', sessionId: session.id },
      content: 'x',
      planCommentRefs: [{ id: 'c', version: 1 }],
    });
    expect(unavailable).toMatchObject(missingPlans);
    expect((unavailable as { message: string }).message).toMatch(/task_plans, task_plan_comments, task_plan_comment_admissions/);
    expect(
      await store.stageAttachment({ id: 'a', ownerId: 'o', workspaceId: 'ws', name: 'n', mimeType: 'text/plain', sizeBytes: 1, storageKey: 'k', ttlMs: 1000 }),
    ).toMatchObject({
      ok: false,
      code: 'unavailable',
      missing: ['task_message_attachments'],
    });
    expect(
      await store.acceptPrompt({
        callerId: randomUUID(),
        target: { kind: 'session', sessionId: session.id },
        content: 'x',
        attachmentIds: ['a'],
        attachmentOwnerId: 'o',
      }),
    ).toMatchObject({
      code: 'unavailable',
      missing: ['task_message_attachments'],
    });

    const callerId = randomUUID();
    const plain = await store.acceptPrompt({ callerId, target: { kind: 'session', sessionId: session.id }, content: 'hello' });
    expect(plain).toMatchObject({ ok: true, promptSeq: 1, snapshot: null, receiptId: callerId });
    expect(await rawRows(t.ctx, 'SELECT id, delivery_kind FROM pending_projector_prompt_receipts')).toEqual([{ id: callerId, delivery_kind: 'direct' }]);
    expect(await t.ctx.knex('task_session_prompt_seq').where({ task_session_id: session.id }).first()).toMatchObject({ last_seq: 1 });
  });

  it("beside Kandev's newer schema: writes Kandev's plan tables, and keeps receipts out of Kandev's queue", async () => {
    const t = await open(openKandevDatabase(dialect));
    await createKandevPlanTables(t.db);
    const before = await catalogSnapshot(t);
    await migrateSchema(t.db);
    const changes = catalogChanges(before, await catalogSnapshot(t));
    expect(changes.changed).toEqual([]);
    expect(changes.removed).toEqual([]);
    expect(changes.added.filter((key) => !/^[a-z]+:(pp_|pending_projector_|sqlite_autoindex_pending_projector_)|^table:sqlite_sequence$/.test(key))).toEqual(
      [],
    );
    const store = await openOwnedStore(t.ctx);
    expect(store.schema).toEqual({
      missingForComments: [],
      missingForAttachments: [],
      missingForPrompts: [],
      receiptTable: 'pending_projector_prompt_receipts',
      queueState: true,
      kandevOwnsPlans: true,
    });

    const task = await seedPlanTask(t.ctx);
    const created = await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body: 'beside Kandev' });
    if (!created.ok || !created.comment) throw new Error(JSON.stringify(created));
    const callerId = randomUUID();
    const accepted = await store.acceptPrompt({
      callerId,
      target: { kind: 'session', sessionId: task.sessionId },
      content: 'go',
      planCommentRefs: [{ id: created.comment.id, version: 1 }],
    });
    expect(accepted).toMatchObject({ ok: true, consumedCommentIds: [created.comment.id], snapshot: { revision: 2, comments: [] } });
    expect(await rawRows(t.ctx, 'SELECT id FROM pending_projector_prompt_receipts')).toEqual([{ id: callerId }]);
    expect(await rawRows(t.ctx, 'SELECT id FROM queued_messages')).toEqual([]);

    // Kandev addresses comments by UUID: any other id is refused before anything is written.
    const revision = (await rawRows<{ comments_revision: number }>(t.ctx, 'SELECT comments_revision FROM task_plans WHERE id = ?', [task.planId]))[0];
    expect(await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: 'c-not-a-uuid', body: 'refused' })).toMatchObject({
      ok: false,
      code: 'bad_request',
      reason: 'invalid_comment_id',
    });
    expect((await rawRows<{ comments_revision: number }>(t.ctx, 'SELECT comments_revision FROM task_plans WHERE id = ?', [task.planId]))[0]).toEqual(revision);

    // Kandev's plan stays Kandev's to delete: refused before any statement.
    const plans = await rawRows(t.ctx, 'SELECT * FROM task_plans ORDER BY id');
    expect(await store.deletePlan({ taskId: task.taskId, planId: task.planId })).toMatchObject({ ok: false, code: 'conflict', reason: 'plan_owned_by_kandev' });
    expect(await rawRows(t.ctx, 'SELECT * FROM task_plans ORDER BY id')).toEqual(plans);
  });
});
