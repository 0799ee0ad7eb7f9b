import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import type { AcceptPromptInput, PlanCommentRef } from '../../src/repository/prompts/promptStore.js';
import { createPromptReceiptStore, type PromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { openTestDatabase, type TestDatabase } from './databases.js';
import { ownedStore, type OwnedStores, type PlanTask } from './planComments.js';

/**
 * What the queue's repository tests share: a database of the dialect opened before and closed after
 * the describe, the owned stores and the receipt store over it, and the steps every case starts with
 * (a comment, a staged attachment, a queued prompt accepted).
 */
export interface QueueFixtures {
  readonly t: TestDatabase;
  readonly store: OwnedStores;
  readonly receipts: PromptReceiptStore;
  comment(task: PlanTask, body: string, extra?: { selectedText?: string; anchorFrom?: number; anchorTo?: number }): Promise<PlanCommentRef>;
  /** A staged attachment of `user-1`, its id. */
  stage(task: PlanTask): Promise<string>;
  /** A queued prompt's acceptance input for the task's session (a fresh caller id). */
  queued(task: PlanTask, extra?: Partial<AcceptPromptInput>): AcceptPromptInput;
  /** Accepts `input`, its queue id. */
  enqueue(input: AcceptPromptInput): Promise<string>;
}

/** Call inside a describe: the fixtures are ready from its beforeAll on. */
export function useQueueFixtures(dialect: DialectName, options: { file?: boolean } = {}): QueueFixtures {
  let t: TestDatabase | undefined;
  let store: OwnedStores | undefined;
  let receipts: PromptReceiptStore | undefined;
  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, options);
    store = ownedStore(t.ctx);
    receipts = createPromptReceiptStore(t.ctx, COMPLETE_PLAN_COMMENT_SCHEMA);
  });
  afterAll(async () => {
    await t?.close();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('queue fixtures are used before their beforeAll');
    return value;
  };
  const fixtures: QueueFixtures = {
    get t() {
      return ready(t);
    },
    get store() {
      return ready(store);
    },
    get receipts() {
      return ready(receipts);
    },
    async comment(task, body, extra = {}) {
      const created = await fixtures.store.createComment({ taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body, ...extra });
      if (!created.ok || !created.comment) throw new Error(`create failed: ${JSON.stringify(created)}`);
      return { id: created.comment.id, version: created.comment.version };
    },
    async stage(task) {
      const id = randomUUID();
      const staged = await fixtures.store.stageAttachment({
        id,
        ownerId: 'user-1',
        workspaceId: task.workspaceId,
        name: 'a.txt',
        mimeType: 'text/plain',
        sizeBytes: 3,
        storageKey: `blob/${id}`,
        ttlMs: 3_600_000,
      });
      if (!staged.ok) throw new Error(`stage failed: ${JSON.stringify(staged)}`);
      return id;
    },
    queued: (task, extra = {}) => ({
      callerId: `q-${randomUUID()}`,
      target: { kind: 'session', sessionId: task.sessionId },
      content: 'Then run the tests.',
      deliveryKind: 'queued',
      queueMaxPerSession: 10,
      ...extra,
    }),
    async enqueue(input) {
      const accepted = await fixtures.store.acceptPrompt(input);
      if (!accepted.ok) throw new Error(`enqueue failed: ${JSON.stringify(accepted)}`);
      return accepted.callerId;
    },
  };
  return fixtures;
}
