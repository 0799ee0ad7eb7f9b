import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRepositoryContext, beginOrJoin, type RepositoryContext } from '../../src/repository/context.js';
import type { AcceptPromptInput, PlanCommentRef } from '../../src/repository/prompts/promptStore.js';
import { createSession } from '../../src/repository/tasks/tasks.js';
import { startTurn } from '../../src/repository/turns/turns.js';
import { formatPlanCommentPrompt } from '../../src/turns/planCommentPrompt.js';
import { describeEachDialect, openSecondPool, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { acceptanceState, ownedStore, seedPlanTask, type OwnedStores, type PlanTask } from '../support/planComments.js';

const T0 = '2026-09-02T10:00:00.000000Z';

describeEachDialect('the accepting transaction on %s', (dialect) => {
  let t: TestDatabase;
  let store: OwnedStores;
  beforeAll(async () => {
    // A file on SQLite, so a second pool can reach the data; PostgreSQL: a schema either way.
    t = await openTestDatabase(dialect, undefined, { file: true });
    store = ownedStore(t.ctx);
  });
  afterAll(async () => {
    await t.close();
  });

  async function comment(task: PlanTask, body: string, selectedText = '', using: OwnedStores = store): Promise<PlanCommentRef> {
    const created = await using.createComment({ taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body, selectedText });
    if (!created.ok || !created.comment) throw new Error(`create failed: ${JSON.stringify(created)}`);
    return { id: created.comment.id, version: created.comment.version };
  }

  async function stage(
    task: PlanTask,
    overrides: { ownerId?: string; workspaceId?: string; ttlMs?: number } = {},
    using: OwnedStores = store,
  ): Promise<string> {
    const id = randomUUID();
    const staged = await using.stageAttachment({
      id,
      ownerId: overrides.ownerId ?? 'user-1',
      workspaceId: overrides.workspaceId ?? task.workspaceId,
      name: `${id}.txt`,
      mimeType: 'text/plain',
      sizeBytes: 12,
      storageKey: `blob/${id}`,
      ttlMs: overrides.ttlMs ?? 3_600_000,
    });
    if (!staged.ok) throw new Error(`stage failed: ${JSON.stringify(staged)}`);
    return id;
  }

  const send = (task: PlanTask, extra: Partial<AcceptPromptInput> = {}): AcceptPromptInput => ({
    callerId: `caller-${randomUUID()}`,
    target: { kind: 'session', sessionId: task.sessionId },
    content: 'Please revise.',
    ...extra,
  });

  describe('accepting', () => {
    it('writes one message, one direct receipt and one reserved turn, consumes exactly the referenced rows, bumps the revision and claims the attachments', async () => {
      const task = await seedPlanTask(t.ctx);
      const first = await comment(task, 'Rename step 2.', 'Step 2: migrate');
      const kept = await comment(task, 'Keep this one pending.');
      const second = await comment(task, 'Why two passes?\nOne is enough.');
      const attachment = await stage(task);
      const untouched = await stage(task);
      const rowsBefore = await t.ctx.knex('task_plan_comments').whereIn('id', [first.id, second.id]);
      const before = await acceptanceState(t.ctx, task.taskId);
      const input = send(task, { planCommentRefs: [second, first], attachmentIds: [attachment], attachmentOwnerId: 'user-1', model: 'm1', authorId: 'user-1' });

      const accepted = await store.acceptPrompt(input);

      const expectedPrompt = formatPlanCommentPrompt(
        rowsBefore.map((r: Record<string, unknown>) => ({
          id: String(r.id),
          body: String(r.body),
          selected_text: String(r.selected_text),
          created_at: String(r.created_at),
        })),
        'Please revise.',
      );
      expect(expectedPrompt).toBe(
        '### Plan Comments\n\n```\nStep 2: migrate\n```\n> Rename step 2.\n\n> Why two passes?\n> One is enough.\n\n---\n\nPlease revise.',
      );
      expect(accepted).toMatchObject({
        ok: true,
        replayed: false,
        taskId: task.taskId,
        sessionId: task.sessionId,
        callerId: input.callerId,
        receiptId: input.callerId,
        messageId: input.callerId,
        promptSeq: 1,
        deliveryKind: 'direct',
        delivery: 'pending',
        content: expectedPrompt,
        consumedCommentIds: [second.id, first.id],
        attachmentIds: [attachment],
        snapshot: { taskId: task.taskId, planId: task.planId, revision: (before.revision as number) + 1, comments: [{ id: kept.id, version: 1 }] },
      });
      if (!accepted.ok) throw new Error('not accepted');

      const after = await acceptanceState(t.ctx, task.taskId);
      const delta = (table: string) => (after.counts as Record<string, number>)[table]! - (before.counts as Record<string, number>)[table]!;
      expect(delta('task_session_messages')).toBe(1);
      expect(delta('task_session_turns')).toBe(1);
      expect(delta('task_plan_comments')).toBe(-2);
      expect(delta('task_plan_comment_admissions')).toBe(0);
      expect((after.receipts as unknown[]).length - (before.receipts as unknown[]).length).toBe(1);
      expect(after.revision).toBe((before.revision as number) + 1);

      const message = await t.ctx.knex('task_session_messages').where({ id: input.callerId }).first();
      expect(message).toMatchObject({
        task_session_id: task.sessionId,
        task_id: task.taskId,
        turn_id: accepted.turnId,
        author_type: 'user',
        author_id: 'user-1',
        type: 'message',
        content: expectedPrompt,
      });
      expect(Number(message.prompt_seq)).toBe(1);
      expect(JSON.parse(message.metadata)).toEqual({
        client_message_id: input.callerId,
        receipt_id: input.callerId,
        delivery_kind: 'direct',
        plan_comment_refs: [second, first],
        plan_comment_request_fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
        attachments: [
          {
            id: attachment,
            name: `${attachment}.txt`,
            mime_type: 'text/plain',
            size_bytes: 12,
            storage_key: `blob/${attachment}`,
            kind: 'resource',
            delivery_mode: 'prompt',
          },
        ],
      });
      const turn = await t.ctx.knex('task_session_turns').where({ id: accepted.turnId }).first();
      expect(turn).toMatchObject({ task_session_id: task.sessionId, completed_at: null });
      expect(JSON.parse(turn.metadata)).toEqual({ prompt_dispatch_pending: true });

      const receipt = await t.ctx.knex('queued_messages').where({ id: input.callerId }).first();
      expect(receipt).toMatchObject({
        session_id: task.sessionId,
        task_id: task.taskId,
        content: expectedPrompt,
        model: 'm1',
        queued_by: 'user',
        delivery_kind: 'direct',
        delivery_reservation_token: null,
        delivery_attempted_at: null,
        durable_transcript_message_id: input.callerId,
        durable_transcript_turn_id: accepted.turnId,
      });
      expect(JSON.parse(receipt.metadata_json)).toMatchObject({ client_message_id: input.callerId, plan_comment_refs: [second, first] });
      expect(JSON.parse(receipt.attachments_json)).toEqual([expect.objectContaining({ id: attachment })]);

      const claimed = await t.ctx.knex('task_message_attachments').whereIn('id', [attachment, untouched]).orderBy('id');
      const byId = new Map<unknown, Record<string, unknown>>(claimed.map((a: Record<string, unknown>) => [a.id, a]));
      expect(byId.get(attachment)).toMatchObject({ state: 'claimed', task_id: task.taskId, session_id: task.sessionId, message_id: input.callerId });
      expect(byId.get(untouched)).toMatchObject({ state: 'staged', message_id: '' });
      expect(await t.ctx.knex('task_plan_comments').where({ id: kept.id }).first()).toMatchObject({ body: 'Keep this one pending.' });
      expect(Number((await t.ctx.knex('task_session_prompt_seq').where({ task_session_id: task.sessionId }).first()).last_seq)).toBe(1);
    });

    it('gives every prompt of a session the next prompt_seq, starting after the highest one its messages carry', async () => {
      const task = await seedPlanTask(t.ctx);
      const turnId = (await startTurn(t.ctx, task.sessionId)).id;
      // A user message an older writer numbered without the counter row.
      await t.ctx.knex('task_session_messages').insert({
        id: randomUUID(),
        task_session_id: task.sessionId,
        task_id: task.taskId,
        turn_id: turnId,
        author_type: 'user',
        content: 'old',
        metadata: '{}',
        created_at: t.ctx.clock(),
        updated_at: t.ctx.clock(),
        prompt_seq: 7,
      });
      expect(await store.acceptPrompt(send(task))).toMatchObject({ ok: true, promptSeq: 8 });
      expect(await store.acceptPrompt(send(task))).toMatchObject({ ok: true, promptSeq: 9 });
    });

    it('sends to a non-primary session when it is the one addressed, with the shared comments', async () => {
      const task = await seedPlanTask(t.ctx);
      const other = await createSession(t.ctx, { taskId: task.taskId, state: 'WAITING_FOR_INPUT' });
      const ref = await comment(task, 'for the side session');
      const accepted = await store.acceptPrompt(send(task, { target: { kind: 'session', sessionId: other.id, taskId: task.taskId }, planCommentRefs: [ref] }));
      expect(accepted).toMatchObject({ ok: true, sessionId: other.id, consumedCommentIds: [ref.id] });
    });

    it('accepts a prompt without comments without touching the collection, and Run with the block alone', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'pending');
      const plain = await store.acceptPrompt(send(task, { content: 'just a message' }));
      expect(plain).toMatchObject({ ok: true, content: 'just a message', consumedCommentIds: [], snapshot: { revision: 1, comments: [{ id: ref.id }] } });
      const run = await store.acceptPrompt({
        callerId: `run-${randomUUID()}`,
        target: { kind: 'primary', taskId: task.taskId, expectedSessionId: task.sessionId },
        content: '',
        planCommentRefs: [ref],
      });
      expect(run).toMatchObject({
        ok: true,
        sessionId: task.sessionId,
        content: '### Plan Comments\n\n> pending\n\n',
        snapshot: { revision: 2, comments: [] },
      });
    });
  });

  describe('refusing, with every row, revision and attachment state unchanged', () => {
    async function expectNothingWritten(
      task: PlanTask,
      input: AcceptPromptInput,
      expected: Record<string, unknown>,
      using: OwnedStores = store,
      ctx: RepositoryContext = t.ctx,
    ) {
      const before = await acceptanceState(ctx, task.taskId);
      const outcome = await using.acceptPrompt(input);
      expect(outcome).toMatchObject({ ok: false, ...expected });
      expect(await acceptanceState(ctx, task.taskId)).toEqual(before);
      expect(await ctx.knex('task_session_messages').where({ id: input.callerId }).first()).toBeUndefined();
      return outcome;
    }

    it('refuses a stale version, an unknown comment and a comment of another task with plan_comments_changed and the current snapshot', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'original');
      const other = await seedPlanTask(t.ctx);
      const foreign = await comment(other, 'not yours');
      await store.updateComment({ taskId: task.taskId, planId: task.planId, commentId: ref.id, version: 1, body: 'edited' });
      const current = await store.getSnapshot(task.taskId);
      for (const refs of [[ref], [{ id: 'no-such-comment', version: 1 }], [{ id: ref.id, version: 2 }, foreign]]) {
        const outcome = await expectNothingWritten(task, send(task, { planCommentRefs: refs }), { code: 'conflict', reason: 'plan_comments_changed' });
        expect((outcome as { snapshot: unknown }).snapshot).toEqual(current.ok ? current.snapshot : undefined);
      }
      expect(await t.ctx.knex('task_plan_comments').where({ id: foreign.id }).first()).toBeDefined();
    });

    it('refuses attachments of another owner or workspace, expired, or claimed already', async () => {
      const { ctx, time } = withManualClock(t.ctx, T0);
      const timed = ownedStore(ctx);
      const task = await seedPlanTask(ctx);
      const ref = await comment(task, 'with files', '', timed);
      const foreignOwner = await stage(task, { ownerId: 'someone-else' }, timed);
      const otherWorkspace = await stage(task, { workspaceId: 'ws-other' }, timed);
      const expiring = await stage(task, { ttlMs: 1_000 }, timed);
      const good = await stage(task, {}, timed);
      const claimedOne = await stage(task, {}, timed);
      expect(await timed.acceptPrompt(send(task, { attachmentIds: [claimedOne], attachmentOwnerId: 'user-1' }))).toMatchObject({ ok: true });
      time.set('2026-09-02T10:00:05.000000Z');
      for (const bad of [foreignOwner, otherWorkspace, expiring, claimedOne, 'no-such-attachment']) {
        const outcome = await expectNothingWritten(
          task,
          send(task, { planCommentRefs: [ref], attachmentIds: [good, bad], attachmentOwnerId: 'user-1' }),
          { code: 'conflict', reason: 'attachments_unavailable', attachmentIds: [bad] },
          timed,
          ctx,
        );
        expect(outcome).toMatchObject({ reason: 'attachments_unavailable' });
      }
      expect(await t.ctx.knex('task_message_attachments').where({ id: good }).first()).toMatchObject({ state: 'staged', message_id: '' });
    });

    it('refuses an archived task with task_inactive', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'archived with the task');
      await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: t.ctx.clock() });
      await expectNothingWritten(task, send(task, { planCommentRefs: [ref] }), { code: 'conflict', reason: 'task_inactive' });
      await expectNothingWritten(
        task,
        { callerId: randomUUID(), target: { kind: 'primary', taskId: task.taskId }, content: '', planCommentRefs: [ref] },
        { code: 'conflict', reason: 'task_inactive' },
      );
    });

    it('refuses a session of another task, an unknown session and an unknown task', async () => {
      const task = await seedPlanTask(t.ctx);
      const other = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'mine');
      await expectNothingWritten(task, send(task, { target: { kind: 'session', sessionId: other.sessionId, taskId: task.taskId }, planCommentRefs: [ref] }), {
        code: 'bad_request',
        reason: 'session_not_in_task',
      });
      await expectNothingWritten(task, send(task, { target: { kind: 'session', sessionId: 'no-such-session' } }), {
        code: 'not_found',
        reason: 'session_not_found',
      });
      await expectNothingWritten(
        task,
        { callerId: randomUUID(), target: { kind: 'primary', taskId: 'no-such-task' }, content: 'x' },
        { code: 'not_found', reason: 'task_not_found' },
      );
      // The other task's session with this task's comments: the comments are not that task's.
      await expectNothingWritten(task, send(other, { planCommentRefs: [ref] }), { code: 'conflict', reason: 'plan_comments_changed' });
    });

    it('refuses a session that is not promptable, or changed state since the preflight', async () => {
      const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
      const ref = await comment(task, 'wait for it');
      await expectNothingWritten(task, send(task, { planCommentRefs: [ref] }), { code: 'conflict', reason: 'session_unavailable', state: 'RUNNING' });
      await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state: 'WAITING_FOR_INPUT' });
      await expectNothingWritten(task, send(task, { planCommentRefs: [ref], expectedSessionState: 'IDLE' }), {
        code: 'conflict',
        reason: 'session_unavailable',
        state: 'WAITING_FOR_INPUT',
      });
      for (const state of ['COMPLETED', 'FAILED', 'CANCELLED', 'CREATED', 'STARTING']) {
        await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state });
        await expectNothingWritten(task, send(task, { planCommentRefs: [ref] }), { code: 'conflict', reason: 'session_unavailable', state });
      }
    });

    it('refuses Run after a primary promotion committed since the preflight, naming the new primary', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'for whoever is primary');
      const promoted = await createSession(t.ctx, { taskId: task.taskId, state: 'IDLE' });
      // Preflight resolved task.sessionId; then the promotion commits.
      await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
      await t.ctx.knex('task_sessions').where({ id: promoted.id }).update({ is_primary: 1 });
      const run = {
        callerId: randomUUID(),
        target: { kind: 'primary' as const, taskId: task.taskId, expectedSessionId: task.sessionId },
        content: '',
        planCommentRefs: [ref],
      };
      await expectNothingWritten(task, run, { code: 'conflict', reason: 'primary_session_changed', primarySessionId: promoted.id });
      await t.ctx.knex('task_sessions').where({ id: promoted.id }).update({ is_primary: 0 });
      await expectNothingWritten(task, { ...run, callerId: randomUUID() }, { code: 'conflict', reason: 'primary_session_changed', primarySessionId: null });
      await expectNothingWritten(
        task,
        { ...run, callerId: randomUUID(), target: { kind: 'primary', taskId: task.taskId } },
        { code: 'not_found', reason: 'primary_session_not_found' },
      );
    });

    it('refuses duplicate refs, duplicate attachment ids, attachments without an owner, and an empty prompt before reading anything', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'once');
      await expectNothingWritten(task, send(task, { planCommentRefs: [ref, ref] }), { code: 'bad_request', reason: 'duplicate_refs' });
      await expectNothingWritten(task, send(task, { attachmentIds: ['a', 'a'], attachmentOwnerId: 'u' }), {
        code: 'bad_request',
        reason: 'duplicate_attachment_ids',
      });
      await expectNothingWritten(task, send(task, { attachmentIds: ['a'] }), { code: 'bad_request', reason: 'attachment_owner_required' });
      await expectNothingWritten(task, send(task, { content: '  \n' }), { code: 'bad_request', reason: 'empty_prompt' });
    });

    it('rolls everything back when a write after the consumption fails, the failure rejecting the call', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'must survive');
      const attachment = await stage(task);
      // A real failure of the last write of the transaction: the receipt insert, after the comments
      // were deleted, the revision bumped, the attachment claimed and the turn and message written.
      if (dialect === 'sqlite') {
        await t.ctx.knex.raw(
          `CREATE TRIGGER pp_test_fail_receipt BEFORE INSERT ON queued_messages WHEN NEW.id LIKE 'fail-%' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`,
        );
      } else {
        await t.ctx.knex.raw(
          `CREATE FUNCTION pp_test_fail_receipt() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.id LIKE 'fail-%' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$`,
        );
        await t.ctx.knex.raw(`CREATE TRIGGER pp_test_fail_receipt BEFORE INSERT ON queued_messages FOR EACH ROW EXECUTE FUNCTION pp_test_fail_receipt()`);
      }
      try {
        const input = send(task, { callerId: `fail-${randomUUID()}`, planCommentRefs: [ref], attachmentIds: [attachment], attachmentOwnerId: 'user-1' });
        const before = await acceptanceState(t.ctx, task.taskId);
        await expect(store.acceptPrompt(input)).rejects.toThrow(/injected failure/);
        expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
        // And the same request goes through once the failure is gone.
        await t.ctx.knex.raw('DROP TRIGGER pp_test_fail_receipt' + (dialect === 'postgres' ? ' ON queued_messages' : ''));
        expect(await store.acceptPrompt(input)).toMatchObject({ ok: true, replayed: false, consumedCommentIds: [ref.id], attachmentIds: [attachment] });
      } finally {
        await t.ctx.knex.raw('DROP TRIGGER IF EXISTS pp_test_fail_receipt' + (dialect === 'postgres' ? ' ON queued_messages' : ''));
      }
    });

    it("undoes only its own writes when it runs inside a caller's transaction and refuses after consuming", async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'inside an outer scope');
      const before = await acceptanceState(t.ctx, task.taskId);
      const marker = randomUUID();
      const outcome = await beginOrJoin(t.ctx, async (tx) => {
        await tx.knex('kandev_meta').insert({ key: marker, value: 'outer write' });
        // Consumes the comment, then fails to claim: the savepoint takes the consumption back.
        return ownedStore(tx).acceptPrompt(send(task, { planCommentRefs: [ref], attachmentIds: ['no-such-attachment'], attachmentOwnerId: 'user-1' }));
      });
      expect(outcome).toMatchObject({ ok: false, reason: 'attachments_unavailable' });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
      expect(await t.ctx.knex('kandev_meta').where({ key: marker }).first()).toMatchObject({ value: 'outer write' });
    });
  });

  describe('replays by caller id', () => {
    it('replays the same request with replayed: true and writes nothing, also after the task was archived', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'sent once');
      const attachment = await stage(task);
      const input = send(task, { planCommentRefs: [ref], attachmentIds: [attachment], attachmentOwnerId: 'user-1' });
      const accepted = await store.acceptPrompt(input);
      if (!accepted.ok) throw new Error(JSON.stringify(accepted));
      const once = await acceptanceState(t.ctx, task.taskId);
      const replay = await store.acceptPrompt({ ...input, planCommentRefs: [...input.planCommentRefs!] });
      expect(replay).toEqual({ ...accepted, replayed: true });
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(once);
      await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: t.ctx.clock() });
      expect(await store.acceptPrompt(input)).toMatchObject({ ok: true, replayed: true, messageId: input.callerId });
    });

    it('replays Run after the primary moved: the request named the task, not a session', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'run me');
      const run: AcceptPromptInput = {
        callerId: randomUUID(),
        target: { kind: 'primary', taskId: task.taskId, expectedSessionId: task.sessionId },
        content: '',
        planCommentRefs: [ref],
      };
      expect(await store.acceptPrompt(run)).toMatchObject({ ok: true, sessionId: task.sessionId });
      const promoted = await createSession(t.ctx, { taskId: task.taskId, state: 'IDLE' });
      await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
      await t.ctx.knex('task_sessions').where({ id: promoted.id }).update({ is_primary: 1 });
      expect(await store.acceptPrompt({ ...run, target: { kind: 'primary', taskId: task.taskId, expectedSessionId: promoted.id } })).toMatchObject({
        ok: true,
        replayed: true,
        sessionId: task.sessionId,
      });
    });

    it('serves a replay from the transcript once the receipt is gone, with its delivery label', async () => {
      const task = await seedPlanTask(t.ctx);
      const input = send(task);
      await store.acceptPrompt(input);
      await t.ctx.knex('queued_messages').where({ id: input.callerId }).del();
      const patch = t.ctx.dialect.jsonPatch('metadata', { prompt_delivery: 'unconfirmed' });
      await t.ctx
        .knex('task_session_messages')
        .where({ id: input.callerId })
        .update({ metadata: t.ctx.knex.raw(patch.sql, patch.bindings as never[]) });
      expect(await store.acceptPrompt(input)).toMatchObject({ ok: true, replayed: true, delivery: 'unconfirmed', content: 'Please revise.' });
    });

    it('refuses the same caller id for another request with caller_id_conflict, writing nothing', async () => {
      const task = await seedPlanTask(t.ctx);
      const ref = await comment(task, 'a');
      const extra = await comment(task, 'b');
      const input = send(task, { planCommentRefs: [ref] });
      await store.acceptPrompt(input);
      const other = await createSession(t.ctx, { taskId: task.taskId, state: 'IDLE' });
      const once = await acceptanceState(t.ctx, task.taskId);
      for (const variant of [
        { content: 'different text' },
        { planCommentRefs: [extra] },
        { target: { kind: 'session' as const, sessionId: other.id } },
        { target: { kind: 'primary' as const, taskId: task.taskId } },
        { model: 'other-model' },
      ]) {
        expect(await store.acceptPrompt({ ...input, ...variant })).toMatchObject({ ok: false, code: 'conflict', reason: 'caller_id_conflict' });
      }
      expect(await acceptanceState(t.ctx, task.taskId)).toEqual(once);
    });
  });

  describe('rows another producer wrote', () => {
    it("reads a message or receipt under the caller id with malformed metadata as nobody's request: caller_id_conflict, no SQL error", async () => {
      const task = await seedPlanTask(t.ctx);
      const turnId = (await startTurn(t.ctx, task.sessionId)).id;
      for (const metadata of ['', 'garbage{', null, '[]', '{"plan_comment_request_fingerprint": 5}']) {
        const input = send(task);
        await t.ctx.knex('task_session_messages').insert({
          id: input.callerId,
          task_session_id: task.sessionId,
          task_id: task.taskId,
          turn_id: turnId,
          author_type: 'user',
          content: 'kandev wrote me',
          metadata,
          created_at: t.ctx.clock(),
          updated_at: t.ctx.clock(),
        });
        const before = await acceptanceState(t.ctx, task.taskId);
        expect(await store.acceptPrompt(input)).toMatchObject({ ok: false, code: 'conflict', reason: 'caller_id_conflict' });
        expect(await acceptanceState(t.ctx, task.taskId)).toEqual(before);
      }
      for (const metadataJson of ['', 'garbage{', '"a string"']) {
        const input = send(task);
        await t.ctx.knex('queued_messages').insert({
          id: input.callerId,
          session_id: task.sessionId,
          task_id: task.taskId,
          position: 1,
          content: 'queued by kandev',
          metadata_json: metadataJson,
          attachments_json: '{not an array',
          queued_at: t.ctx.clock(),
        });
        expect(await store.acceptPrompt(input)).toMatchObject({ ok: false, code: 'conflict', reason: 'caller_id_conflict' });
      }
    });

    it('accepts beside queue rows of the session whose metadata_json and attachments_json are malformed, after their positions', async () => {
      const task = await seedPlanTask(t.ctx);
      await t.ctx.knex('queued_messages').insert([
        { id: randomUUID(), session_id: task.sessionId, task_id: task.taskId, position: 4, metadata_json: '', attachments_json: '', queued_at: t.ctx.clock() },
        {
          id: randomUUID(),
          session_id: task.sessionId,
          task_id: task.taskId,
          position: 2,
          metadata_json: '{oops',
          attachments_json: 'null',
          queued_at: t.ctx.clock(),
        },
      ]);
      const input = send(task);
      expect(await store.acceptPrompt(input)).toMatchObject({ ok: true });
      expect(await t.ctx.knex('queued_messages').where({ id: input.callerId }).first()).toMatchObject({ position: 5, delivery_kind: 'direct' });
    });
  });

  describe('concurrency', () => {
    it('lets exactly one of a prompt and a concurrent edit of its comment win, the other failing closed', async () => {
      const second = dialect === 'postgres' ? openSecondPool(t) : undefined;
      try {
        const otherStore = second ? ownedStore(createRepositoryContext(second)) : store;
        for (let round = 0; round < 4; round++) {
          const task = await seedPlanTask(t.ctx);
          const ref = await comment(task, `before edit ${round}`);
          const edit = () => otherStore.updateComment({ taskId: task.taskId, planId: task.planId, commentId: ref.id, version: 1, body: `after edit ${round}` });
          const prompt = () => store.acceptPrompt(send(task, { planCommentRefs: [ref] }));
          const [sent, edited] =
            round % 2 === 0
              ? await Promise.all([prompt(), edit()])
              : ((await Promise.all([edit(), prompt()])).reverse() as [Awaited<ReturnType<typeof prompt>>, Awaited<ReturnType<typeof edit>>]);
          expect([sent.ok, edited.ok].filter(Boolean)).toHaveLength(1);
          if (sent.ok) {
            expect(sent.content).toContain(`before edit ${round}`);
            expect(edited).toMatchObject({ ok: false, reason: 'plan_comments_changed', snapshot: { comments: [] } });
          } else {
            expect(sent).toMatchObject({ reason: 'plan_comments_changed', snapshot: { comments: [{ id: ref.id, version: 2, body: `after edit ${round}` }] } });
            expect(await t.ctx.knex('task_session_messages').where({ task_session_id: task.sessionId })).toHaveLength(0);
          }
        }
      } finally {
        await second?.destroy();
      }
    });

    it('serialises two concurrent prompts under one caller id: the same request is accepted once and replayed, another request conflicts', async () => {
      const second = dialect === 'postgres' ? openSecondPool(t) : undefined;
      try {
        const otherStore = second ? ownedStore(createRepositoryContext(second)) : store;
        const task = await seedPlanTask(t.ctx);
        const ref = await comment(task, 'once only');
        const input = send(task, { planCommentRefs: [ref] });
        const same = await Promise.all([store.acceptPrompt(input), otherStore.acceptPrompt(input)]);
        expect(same.map((o) => o.ok && o.replayed).sort()).toEqual([false, true]);
        // The same caller id on another task at the same time: one wins, the other is refused.
        const a = await seedPlanTask(t.ctx);
        const b = await seedPlanTask(t.ctx);
        const callerId = `shared-${randomUUID()}`;
        const split = await Promise.all([store.acceptPrompt(send(a, { callerId })), otherStore.acceptPrompt(send(b, { callerId }))]);
        expect(split.filter((o) => o.ok)).toHaveLength(1);
        expect(split.filter((o) => !o.ok)).toEqual([expect.objectContaining({ code: 'conflict', reason: 'caller_id_conflict' })]);
        expect(await t.ctx.knex('task_session_messages').where({ id: callerId })).toHaveLength(1);
      } finally {
        await second?.destroy();
      }
    });

    it('accepts exactly one of two concurrent prompts on overlapping comments; the loser gets plan_comments_changed and leaves no trace', async () => {
      // SQLite: both on the pool's one writer connection (better-sqlite3 waits for a lock
      // synchronously, so a second pool in one process could only stall it). PostgreSQL: two pools,
      // truly concurrent, meeting at the task row lock.
      const second = dialect === 'postgres' ? openSecondPool(t) : undefined;
      try {
        const rightStore = second ? ownedStore(createRepositoryContext(second)) : store;
        for (let round = 0; round < 6; round++) {
          const task = await seedPlanTask(t.ctx);
          const a = await comment(task, `a${round}`);
          const b = await comment(task, `b${round}`);
          const c = await comment(task, `c${round}`);
          const left = send(task, { content: `left ${round}`, planCommentRefs: [a, b] });
          const right = send(task, { content: `right ${round}`, planCommentRefs: [b, c] });
          const outcomes =
            round % 2 === 0
              ? await Promise.all([store.acceptPrompt(left), rightStore.acceptPrompt(right)])
              : (await Promise.all([rightStore.acceptPrompt(right), store.acceptPrompt(left)])).reverse();
          const winners = outcomes.filter((o) => o.ok);
          const losers = outcomes.filter((o) => !o.ok);
          expect(winners).toHaveLength(1);
          expect(losers).toEqual([expect.objectContaining({ code: 'conflict', reason: 'plan_comments_changed' })]);
          const leftWon = outcomes[0]!.ok;
          const loserInput = leftWon ? right : left;
          const messages = await t.ctx.knex('task_session_messages').where({ task_session_id: task.sessionId, author_type: 'user' });
          expect(messages).toHaveLength(1);
          expect(messages.some((m: Record<string, unknown>) => String(m.content).includes(loserInput.content))).toBe(false);
          expect(await t.ctx.knex('queued_messages').where({ id: loserInput.callerId }).first()).toBeUndefined();
          const remaining = leftWon ? c : a;
          expect(await store.getSnapshot(task.taskId)).toMatchObject({ ok: true, snapshot: { revision: 4, comments: [{ id: remaining.id }] } });
          expect((losers[0] as { snapshot: { comments: Array<{ id: string }> } }).snapshot.comments.map((x) => x.id)).toEqual([remaining.id]);
        }
      } finally {
        await second?.destroy();
      }
    });
  });
});
