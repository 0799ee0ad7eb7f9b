import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { legacyCommentId, previousLegacyCommentId } from '../../src/repository/planComments/commentIds.js';
import type { LegacyPlanDraft, PlanCommentSnapshot } from '../../src/repository/planComments/planCommentStore.js';
import { createSession, setSessionState } from '../../src/repository/tasks/tasks.js';
import { upsertTaskPlan } from '../../src/repository/planComments/taskPlans.js';
import { PLAN_COMMENT_LIMITS } from '../../src/turns/planCommentPrompt.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { acceptanceState, ownedStore, seedPlanTask, type OwnedStores, type PlanTask } from '../support/planComments.js';

const T0 = '2026-09-02T10:00:00.000000Z';

function snapshotOf(result: { ok: boolean } & Partial<{ snapshot: PlanCommentSnapshot }>): PlanCommentSnapshot {
  if (!result.ok || !result.snapshot) throw new Error(`expected a snapshot, got ${JSON.stringify(result)}`);
  return result.snapshot;
}

describeEachDialect('the plan-comment collection on %s', (dialect) => {
  let t: TestDatabase;
  let store: OwnedStores;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    store = ownedStore(t.ctx);
  });
  afterAll(async () => {
    await t.close();
  });

  async function create(task: PlanTask, body: string, extra: { selectedText?: string; anchorFrom?: number; anchorTo?: number; commentId?: string } = {}) {
    const result = await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: extra.commentId ?? randomUUID(), body, ...extra });
    if (!result.ok || !result.comment) throw new Error(`create failed: ${JSON.stringify(result)}`);
    return result;
  }

  describe('the snapshot', () => {
    it('is the plan, its revision and its comments in (created_at, id) order', async () => {
      const { ctx, time } = withManualClock(t.ctx, T0);
      const timed = ownedStore(ctx);
      const task = await seedPlanTask(ctx);
      time.set('2026-09-02T10:00:02.000000Z');
      await timed.createComment({ taskId: task.taskId, planId: task.planId, commentId: 'z-first', body: 'later' });
      time.set('2026-09-02T10:00:01.000000Z');
      await timed.createComment({ taskId: task.taskId, planId: task.planId, commentId: 'b-tie', body: 'tie b' });
      time.set('2026-09-02T10:00:01.000000Z');
      await timed.createComment({
        taskId: task.taskId,
        planId: task.planId,
        commentId: 'a-tie',
        body: 'tie a',
        selectedText: 'Step 1',
        anchorFrom: 3,
        anchorTo: 9,
      });
      const read = await store.getSnapshot(task.taskId);
      const snapshot = snapshotOf(read);
      expect(snapshot).toMatchObject({ taskId: task.taskId, planId: task.planId, revision: 3 });
      expect(snapshot.comments.map((c) => c.id)).toEqual(['a-tie', 'b-tie', 'z-first']);
      expect(snapshot.comments[0]).toEqual({
        id: 'a-tie',
        taskId: task.taskId,
        planId: task.planId,
        body: 'tie a',
        selectedText: 'Step 1',
        anchorFrom: 3,
        anchorTo: 9,
        version: 1,
        createdAt: '2026-09-02T10:00:01.000000000Z',
        updatedAt: '2026-09-02T10:00:01.000000000Z',
      });
      expect(snapshot.comments[1]!.anchorFrom).toBeNull();
    });

    it('is empty with no plan id for a task without a plan, and not_found for no task', async () => {
      const task = await seedPlanTask(t.ctx);
      await t.ctx.knex('task_plans').where({ id: task.planId }).del();
      expect(await store.getSnapshot(task.taskId)).toEqual({ ok: true, snapshot: { taskId: task.taskId, planId: null, revision: 0, comments: [] } });
      expect(await store.getSnapshot('no-such-task')).toMatchObject({ ok: false, code: 'not_found', reason: 'task_not_found' });
    });

    it('never changes, revision included, when sessions are created, deleted, promoted or change state', async () => {
      const task = await seedPlanTask(t.ctx);
      await create(task, 'one');
      await create(task, 'two', { selectedText: 'x' });
      const before = snapshotOf(await store.getSnapshot(task.taskId));
      const other = await createSession(t.ctx, { taskId: task.taskId, state: 'IDLE' });
      expect(snapshotOf(await store.getSnapshot(task.taskId))).toEqual(before);
      await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
      await t.ctx.knex('task_sessions').where({ id: other.id }).update({ is_primary: 1 });
      expect(snapshotOf(await store.getSnapshot(task.taskId))).toEqual(before);
      await setSessionState(t.ctx, other.id, 'RUNNING');
      expect(snapshotOf(await store.getSnapshot(task.taskId))).toEqual(before);
      await t.ctx.knex('task_sessions').where({ id: task.sessionId }).del();
      expect(snapshotOf(await store.getSnapshot(task.taskId))).toEqual(before);
    });

    it('keeps the comments and the revision when the plan content is edited', async () => {
      const task = await seedPlanTask(t.ctx);
      await create(task, 'keep me');
      const before = snapshotOf(await store.getSnapshot(task.taskId));
      const edited = await upsertTaskPlan(t.ctx, { taskId: task.taskId, content: 'rewritten' });
      expect(edited.id).toBe(task.planId);
      expect(snapshotOf(await store.getSnapshot(task.taskId))).toEqual(before);
    });
  });

  describe('create', () => {
    it('creates a comment at version 1, records its admission and bumps the revision once', async () => {
      const task = await seedPlanTask(t.ctx);
      const result = await create(task, 'line one\r\nline two', { selectedText: 'sel\rtext' });
      expect(result).toMatchObject({ ok: true, replayed: false, comment: { version: 1, body: 'line one\nline two', selectedText: 'sel\ntext' } });
      expect(result.snapshot).toMatchObject({ revision: 1, comments: [{ id: result.comment!.id }] });
      expect(await t.ctx.knex('task_plan_comment_admissions').where({ id: result.comment!.id }).first()).toMatchObject({
        task_id: task.taskId,
        plan_id: task.planId,
      });
    });

    it('replays the same request without writing, also after the comment was consumed or deleted, and never brings it back', async () => {
      const task = await seedPlanTask(t.ctx);
      const input = { taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body: 'once', selectedText: 's', anchorFrom: 1, anchorTo: 2 };
      const first = await store.createComment(input);
      const replay = await store.createComment(input);
      expect(replay).toMatchObject({ ok: true, replayed: true, comment: first.ok ? first.comment : null });
      expect(snapshotOf(replay).revision).toBe(1);
      // Consumption as the accepting transaction does it: the row goes, the admission stays.
      await t.ctx.knex('task_plan_comments').where({ id: input.commentId }).del();
      const before = await acceptanceState(t.ctx, task.taskId);
      const afterConsume = await store.createComment(input);
      expect(afterConsume).toMatchObject({ ok: true, replayed: true, comment: null });
      expect(snapshotOf(afterConsume).comments).toEqual([]);
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
    });

    it('refuses the same comment id for another request, writing nothing', async () => {
      const task = await seedPlanTask(t.ctx);
      const commentId = randomUUID();
      await create(task, 'original', { commentId });
      const before = await acceptanceState(t.ctx, task.taskId);
      for (const variant of [{ body: 'edited' }, { body: 'original', selectedText: 'x' }, { body: 'original', anchorFrom: 4 }]) {
        expect(await store.createComment({ taskId: task.taskId, planId: task.planId, commentId, ...variant })).toMatchObject({
          ok: false,
          code: 'conflict',
          reason: 'comment_id_conflict',
        });
      }
      const other = await seedPlanTask(t.ctx);
      expect(await store.createComment({ taskId: other.taskId, planId: other.planId, commentId, body: 'original' })).toMatchObject({
        ok: false,
        code: 'conflict',
        reason: 'comment_id_conflict',
      });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
    });

    it("answers not_found for an unknown task, and for a plan that is not the task's", async () => {
      const task = await seedPlanTask(t.ctx);
      const other = await seedPlanTask(t.ctx);
      expect(await store.createComment({ taskId: 'nope', planId: task.planId, commentId: randomUUID(), body: 'x' })).toMatchObject({
        ok: false,
        code: 'not_found',
        reason: 'task_not_found',
      });
      expect(await store.createComment({ taskId: task.taskId, planId: other.planId, commentId: randomUUID(), body: 'x' })).toMatchObject({
        ok: false,
        code: 'not_found',
        reason: 'plan_not_found',
      });
      expect(snapshotOf(await store.getSnapshot(task.taskId)).revision).toBe(0);
    });

    it('refuses a comment beyond the collection limit', async () => {
      const task = await seedPlanTask(t.ctx);
      const rows = Array.from({ length: PLAN_COMMENT_LIMITS.commentsPerPlan }, (_, i) => ({
        id: `bulk-${i}-${randomUUID()}`,
        task_id: task.taskId,
        plan_id: task.planId,
        body: `c${i}`,
        selected_text: '',
        version: 1,
        created_at: t.ctx.clock(),
        updated_at: t.ctx.clock(),
      }));
      await t.ctx.knex('task_plan_comments').insert(rows);
      expect(await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body: 'one too many' })).toMatchObject({
        ok: false,
        code: 'conflict',
        reason: 'plan_comments_full',
        limit: PLAN_COMMENT_LIMITS.commentsPerPlan,
      });
    });
  });

  describe('update and delete', () => {
    it('updates at the current version only, moving it up by one and bumping the revision', async () => {
      const task = await seedPlanTask(t.ctx);
      const { comment } = await create(task, 'v1');
      const updated = await store.updateComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: 1, body: 'v2\r\n' });
      expect(updated).toMatchObject({ ok: true, comment: { version: 2, body: 'v2\n' }, snapshot: { revision: 2 } });
      const before = await acceptanceState(t.ctx, task.taskId);
      const stale = await store.updateComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: 1, body: 'lost edit' });
      expect(stale).toMatchObject({ ok: false, code: 'conflict', reason: 'plan_comments_changed' });
      const current = (stale as { snapshot: PlanCommentSnapshot }).snapshot;
      expect(current).toEqual(snapshotOf(await store.getSnapshot(task.taskId)));
      expect(current.comments[0]).toMatchObject({ version: 2, body: 'v2\n' });
      expect(await store.updateComment({ taskId: task.taskId, planId: task.planId, commentId: 'gone', version: 1, body: 'x' })).toMatchObject({
        reason: 'plan_comments_changed',
      });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
    });

    it('deletes at the current version only; a stale version conflicts, an absent comment is deleted: false', async () => {
      const task = await seedPlanTask(t.ctx);
      const { comment } = await create(task, 'to delete');
      await store.updateComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: 1, body: 'edited' });
      const before = await acceptanceState(t.ctx, task.taskId);
      const stale = await store.deleteComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: 1 });
      expect(stale).toMatchObject({
        ok: false,
        code: 'conflict',
        reason: 'plan_comments_changed',
        snapshot: { revision: 2, comments: [{ id: comment!.id, version: 2 }] },
      });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
      expect(await store.deleteComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: 2 })).toMatchObject({
        ok: true,
        deleted: true,
        snapshot: { revision: 3, comments: [] },
      });
      expect(await store.deleteComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: 2 })).toMatchObject({
        ok: true,
        deleted: false,
        snapshot: { revision: 3 },
      });
      // Deleted is deleted: the create replayed afterwards does not bring it back.
      expect(await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, body: 'to delete' })).toMatchObject({
        ok: true,
        replayed: true,
        comment: null,
      });
    });
  });

  describe('plan.delete', () => {
    it('deletes the plan and its collection; a repeat is deleted: false; a replayed create stays consumed', async () => {
      const task = await seedPlanTask(t.ctx);
      const { comment } = await create(task, 'goes with the plan');
      await create(task, 'this one too');
      const other = await seedPlanTask(t.ctx);
      await create(other, 'untouched');
      const otherBefore = snapshotOf(await store.getSnapshot(other.taskId));
      expect(await store.deletePlan({ taskId: task.taskId, planId: task.planId })).toEqual({
        ok: true,
        deleted: true,
        // The row as it was under the lock, for task_plan.deleted.
        plan: expect.objectContaining({ id: task.planId, taskId: task.taskId, commentsRevision: 2, implementationStartedAt: null }),
        snapshot: { taskId: task.taskId, planId: null, revision: 0, comments: [] },
      });
      expect(Number((await t.ctx.knex('task_plan_comments').where({ task_id: task.taskId }).count<{ n: number }[]>({ n: '*' }).first())?.n)).toBe(0);
      expect(await store.deletePlan({ taskId: task.taskId, planId: task.planId })).toMatchObject({ ok: true, deleted: false, plan: null });
      expect(await store.deletePlan({ taskId: 'nope', planId: task.planId })).toMatchObject({ ok: false, code: 'not_found', reason: 'task_not_found' });
      expect(snapshotOf(await store.getSnapshot(other.taskId))).toEqual(otherBefore);
      // A recreated plan starts at revision 0, and the old comment's create is still a replay.
      const recreated = await upsertTaskPlan(t.ctx, { taskId: task.taskId });
      expect(snapshotOf(await store.getSnapshot(task.taskId))).toEqual({ taskId: task.taskId, planId: recreated.id, revision: 0, comments: [] });
      expect(await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, body: 'goes with the plan' })).toMatchObject({
        ok: true,
        replayed: true,
        comment: null,
      });
    });
  });

  describe('legacy import', () => {
    const draft = (sessionId: string, overrides: Partial<LegacyPlanDraft> = {}): LegacyPlanDraft => ({
      id: randomUUID(),
      sessionId,
      text: 'from the browser',
      createdAt: '2026-09-01T08:00:00.123456Z',
      status: 'pending',
      source: 'plan',
      selectedText: 'Step 2',
      from: 10,
      to: 16,
      ...overrides,
    });

    it('merges drafts of every session into the one collection, keeping their instants, and skips sent and non-plan drafts', async () => {
      const task = await seedPlanTask(t.ctx);
      const a = draft(task.sessionId, { createdAt: '2026-09-01T08:00:02Z' });
      const b = draft('session-deleted-long-ago', { createdAt: '2026-09-01T08:00:01Z', text: 'line\r\nnext' });
      const sent = draft(task.sessionId, { status: 'sent' });
      const diff = draft(task.sessionId, { source: 'diff' });
      const empty = draft(task.sessionId, { text: '  ' });
      const result = await store.importLegacy({ taskId: task.taskId, drafts: [a, b, sent, diff, empty, a] });
      expect(result).toMatchObject({
        ok: true,
        imported: [legacyCommentId(task.taskId, a.sessionId, a.id), legacyCommentId(task.taskId, b.sessionId, b.id)],
        skipped: [
          { id: sent.id, reason: 'sent' },
          { id: diff.id, reason: 'not_plan' },
          { id: empty.id, reason: 'empty' },
          { id: a.id, reason: 'duplicate' },
        ],
      });
      const snapshot = snapshotOf(result as never);
      expect(snapshot.revision).toBe(1);
      expect(snapshot.comments.map((c) => [c.body, c.createdAt, c.selectedText, c.anchorFrom, c.anchorTo])).toEqual([
        ['line\nnext', '2026-09-01T08:00:01.000000000Z', 'Step 2', 10, 16],
        ['from the browser', '2026-09-01T08:00:02.000000000Z', 'Step 2', 10, 16],
      ]);
    });

    it('creates nothing when repeated, also after its comments were consumed or deleted', async () => {
      const task = await seedPlanTask(t.ctx);
      const drafts = [draft(task.sessionId), draft(task.sessionId)];
      const first = await store.importLegacy({ taskId: task.taskId, drafts });
      expect(first).toMatchObject({ ok: true, imported: [expect.any(String), expect.any(String)] });
      const once = await acceptanceState(t.ctx, task.taskId);
      const again = await store.importLegacy({ taskId: task.taskId, drafts });
      expect(again).toMatchObject({ ok: true, imported: [], skipped: drafts.map((d) => ({ id: d.id, reason: 'already_imported' })) });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(once);
      // Consume one, delete the other: a third import resurrects neither.
      const [c1, c2] = snapshotOf(first as never).comments;
      await t.ctx.knex('task_plan_comments').where({ id: c1!.id }).del();
      await store.deleteComment({ taskId: task.taskId, planId: task.planId, commentId: c2!.id, version: 1 });
      const emptied = await acceptanceState(t.ctx, task.taskId);
      expect(await store.importLegacy({ taskId: task.taskId, drafts: [...drafts].reverse() })).toMatchObject({
        ok: true,
        imported: [],
        snapshot: { comments: [] },
      });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(emptied);
    });

    it("keeps a draft's own UUID as the comment id and derives a UUIDv5 for any other; a draft already in the collection or its ledger creates nothing", async () => {
      const task = await seedPlanTask(t.ctx);
      const own = draft(task.sessionId);
      const legacyShaped = draft(task.sessionId, { id: 'draft-17' });
      // Kandev's browser migration created this one already, under the draft's own UUID.
      const migrated = draft(task.sessionId);
      await create(task, 'migrated by Kandev', { commentId: migrated.id });
      // This one was imported before ids were UUIDs: its admission is under the old `legacy:` id.
      const importedBefore = draft(task.sessionId, { id: 'draft-18' });
      await t.ctx.knex('task_plan_comment_admissions').insert({
        id: previousLegacyCommentId(task.taskId, importedBefore.sessionId, importedBefore.id),
        task_id: task.taskId,
        plan_id: task.planId,
        request_fingerprint: 'x',
        created_at: T0,
      });

      const result = await store.importLegacy({ taskId: task.taskId, drafts: [own, legacyShaped, migrated, importedBefore] });

      const derived = legacyCommentId(task.taskId, task.sessionId, 'draft-17');
      expect(derived).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(result).toMatchObject({
        ok: true,
        imported: [own.id, derived],
        skipped: [
          { id: migrated.id, reason: 'already_imported' },
          { id: 'draft-18', reason: 'already_imported' },
        ],
      });
      expect(
        snapshotOf(result as never)
          .comments.map((c) => c.id)
          .sort(),
      ).toEqual([own.id, derived, migrated.id].sort());
    });

    it('refuses the whole import for one malformed draft, and answers not_found without a plan', async () => {
      const task = await seedPlanTask(t.ctx);
      const before = await acceptanceState(t.ctx, task.taskId);
      expect(
        await store.importLegacy({ taskId: task.taskId, drafts: [draft(task.sessionId), draft(task.sessionId, { createdAt: '2026-09-01T10:00:00+02:00' })] }),
      ).toMatchObject({
        ok: false,
        code: 'bad_request',
        reason: 'invalid_draft',
      });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
      await t.ctx.knex('task_plans').where({ id: task.planId }).del();
      expect(await store.importLegacy({ taskId: task.taskId, drafts: [draft(task.sessionId)] })).toMatchObject({
        ok: false,
        code: 'not_found',
        reason: 'plan_not_found',
      });
    });
  });

  describe("the plan's text limit (bodies and selected texts together, in UTF-8 bytes)", () => {
    const { planTextMaxBytes, selectedTextMaxBytes } = PLAN_COMMENT_LIMITS;
    /** `bytes` of three-byte characters (and ASCII for the rest), so SQLite's character length() would count them wrong. */
    const textOf = (bytes: number) => '€'.repeat(Math.floor(bytes / 3)) + 'x'.repeat(bytes % 3);

    /** A task whose plan holds comments of `bytes` of text in all (selections of at most Kandev's limit each). */
    async function planHolding(bytes: number): Promise<PlanTask> {
      const task = await seedPlanTask(t.ctx);
      for (let left = bytes, i = 0; left > 0; i++) {
        const selected = Math.min(left - 1, selectedTextMaxBytes);
        await create(task, 'b', { selectedText: textOf(selected), commentId: `fill-${i}-${randomUUID()}` });
        left -= selected + 1;
      }
      return task;
    }

    it('accepts a comment that fills the plan to exactly 1 MiB and refuses one byte more, naming the limit', async () => {
      const task = await planHolding(planTextMaxBytes - 100);
      const over = await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body: 'b', selectedText: textOf(100) });
      expect(over).toMatchObject({ ok: false, code: 'conflict', reason: 'plan_comments_full' });
      expect((over as { message: string }).message).toMatch(/1048577 bytes of body and selected text \(at most 1048576\)/);
      await create(task, 'b', { selectedText: textOf(99) });
      expect((await collectionTextBytes(task)).bytes).toBe(planTextMaxBytes);
    });

    it('refuses an edit whose longer body takes the plan past 1 MiB, and takes one that ends exactly at it', async () => {
      const task = await planHolding(planTextMaxBytes - 10);
      const { comment } = await create(task, textOf(5));
      const edit = (body: string) => store.updateComment({ taskId: task.taskId, planId: task.planId, commentId: comment!.id, version: comment!.version, body });
      expect(await edit(textOf(11))).toMatchObject({ ok: false, code: 'conflict', reason: 'plan_comments_full' });
      expect(await edit(textOf(10))).toMatchObject({ ok: true, comment: { version: 2 } });
    });

    it('refuses a legacy import that would take the plan past 1 MiB, importing nothing', async () => {
      const task = await planHolding(planTextMaxBytes - 20);
      const drafts = (bytes: number) => [
        { id: randomUUID(), sessionId: task.sessionId, text: textOf(bytes), createdAt: '2026-09-01T08:00:00Z', selectedText: '' },
        { id: randomUUID(), sessionId: task.sessionId, text: 'x', createdAt: '2026-09-01T08:00:01Z', selectedText: textOf(9) },
      ];
      const before = await acceptanceState(t.ctx, task.taskId);
      expect(await store.importLegacy({ taskId: task.taskId, drafts: drafts(11) })).toMatchObject({
        ok: false,
        code: 'conflict',
        reason: 'plan_comments_full',
      });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
      expect(await store.importLegacy({ taskId: task.taskId, drafts: drafts(10) })).toMatchObject({ ok: true });
      expect((await collectionTextBytes(task)).bytes).toBe(planTextMaxBytes);
    });

    async function collectionTextBytes(task: PlanTask): Promise<{ bytes: number }> {
      const snapshot = snapshotOf(await store.getSnapshot(task.taskId));
      return { bytes: snapshot.comments.reduce((n, c) => n + Buffer.byteLength(c.body) + Buffer.byteLength(c.selectedText), 0) };
    }
  });

  describe('attachment staging', () => {
    it('stages metadata only, idempotent by id; other metadata or a taken storage key conflicts', async () => {
      const { ctx } = withManualClock(t.ctx, T0);
      const timed = ownedStore(ctx);
      const input = {
        id: randomUUID(),
        ownerId: 'user-1',
        workspaceId: 'ws-1',
        name: 'a.png',
        mimeType: 'image/png',
        sizeBytes: 42,
        storageKey: `key-${randomUUID()}`,
        ttlMs: 60_000,
      };
      const staged = await timed.stageAttachment(input);
      expect(staged).toMatchObject({
        ok: true,
        replayed: false,
        attachment: { state: 'staged', taskId: '', sessionId: '', messageId: '', expiresAt: '2026-09-02T10:01:00.000000000Z' },
      });
      expect(await timed.stageAttachment(input)).toMatchObject({ ok: true, replayed: true, attachment: staged.ok ? staged.attachment : {} });
      expect(await timed.stageAttachment({ ...input, sizeBytes: 43 })).toMatchObject({ ok: false, code: 'conflict', reason: 'attachment_id_conflict' });
      expect(await timed.stageAttachment({ ...input, id: randomUUID() })).toMatchObject({ ok: false, code: 'conflict', reason: 'attachment_id_conflict' });
    });
  });
});
