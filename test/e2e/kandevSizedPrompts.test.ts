import { randomUUID } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { SETTINGS } from '../../src/config.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, topologyFor } from '../../src/contract/subjects.js';
import { listDeadLetters } from '../../src/events/deadLetters.js';
import { jetstreamManager } from '@nats-io/jetstream';
import { collectEvents } from '../support/busEvents.js';
import { silentLogger } from '../../src/logger.js';
import { formatPlanCommentPrompt, PLAN_COMMENT_LIMITS, utf8Length } from '../../src/turns/index.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/**
 * Text of exactly `bytes` UTF-8 bytes that JSON escapes at its worst: `<` (six bytes in Go's
 * encoder, Kandev's), `"`, `\` and control characters, with a three-byte character among them.
 */
function escapingText(bytes: number): string {
  const unit = '<"\\\u0001\u001f€'; // 1+1+1+1+1+3 = 8 bytes
  const text = unit.repeat(Math.floor(bytes / 8)) + '\u0002'.repeat(bytes % 8);
  expect(Buffer.byteLength(text)).toBe(bytes);
  return text;
}

describeEachDialect("a comment at Kandev's limits, made Kandev-side, sent as a prompt over a real NATS on %s", (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`kandev_sized_${dialect}`);
    // The default MAX_EVENT_BYTES, which the largest request and Kandev's largest message.added fit.
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { maxEventBytes: SETTINGS.maxEventBytes.default }), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 60_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('delivers a 64 KiB body and a 256 KiB selection with typed content to just under 1 MiB, byte for byte, and consumes the comment', async () => {
    const task = await seedPlanTask(t.ctx);
    const { bodyMaxBytes, selectedTextMaxBytes, promptMaxBytes } = PLAN_COMMENT_LIMITS;
    // Written as Kandev's comment service writes a row: straight into its table, no endpoint of ours.
    const comment = {
      id: randomUUID(),
      task_id: task.taskId,
      plan_id: task.planId,
      body: escapingText(bodyMaxBytes),
      selected_text: escapingText(selectedTextMaxBytes),
      version: 1,
      created_at: t.ctx.clock(),
      updated_at: t.ctx.clock(),
    };
    await t.ctx.knex('task_plan_comments').insert(comment);
    const promptComment = { id: comment.id, body: comment.body, selected_text: comment.selected_text, created_at: String(comment.created_at) };
    const around = utf8Length(formatPlanCommentPrompt([promptComment], 'x')) - 1;
    const content = escapingText(promptMaxBytes - around - 1024);
    const expected = formatPlanCommentPrompt([promptComment], content);
    expect(utf8Length(expected)).toBe(promptMaxBytes - 1024);

    const sub: Subscription = nc.subscribe(topologyFor(prefix).agentPromptSubject(task.sessionId));
    const received: Array<{ bytes: number; content: string }> = [];
    void (async () => {
      for await (const m of sub) received.push({ bytes: m.data.byteLength, content: (m.json() as { data: { content: string } }).data.content });
    })();
    const reply = await client.sendMessage({
      session_id: task.sessionId,
      caller_id: randomUUID(),
      content,
      plan_comment_refs: [{ id: comment.id, version: 1 }],
    });
    expect(reply).toMatchObject({ ok: true, replayed: false, plan_comments: { comments: [] } });
    const [prompt] = await eventually(() => (received.length > 0 ? received : undefined), 30_000, "the agent's prompt");
    expect(prompt!.content === expected).toBe(true);
    // Past NATS's default max_payload: the reason the bus is sized for it.
    expect(prompt!.bytes).toBeGreaterThan(1024 * 1024);
    sub.unsubscribe();
  });

  it('refuses a Kandev-side comment whose prompt would pass 1 MiB with bad_request prompt_too_large, consuming nothing', async () => {
    const task = await seedPlanTask(t.ctx);
    const comment = {
      id: randomUUID(),
      task_id: task.taskId,
      plan_id: task.planId,
      body: escapingText(PLAN_COMMENT_LIMITS.bodyMaxBytes),
      selected_text: escapingText(PLAN_COMMENT_LIMITS.selectedTextMaxBytes),
      version: 1,
      created_at: t.ctx.clock(),
      updated_at: t.ctx.clock(),
    };
    await t.ctx.knex('task_plan_comments').insert(comment);
    const content = escapingText(PLAN_COMMENT_LIMITS.promptMaxBytes - 300 * 1024);
    const reply = await client.sendMessage({
      session_id: task.sessionId,
      caller_id: randomUUID(),
      content,
      plan_comment_refs: [{ id: comment.id, version: 1 }],
    });
    expect(reply).toMatchObject({
      ok: false,
      error: { code: 'bad_request', message: 'the expanded prompt is over 1048576 bytes' },
      reason: 'prompt_too_large',
    });
    expect(await t.ctx.knex('task_plan_comments').where({ id: comment.id }).first()).toBeDefined();
  });

  it('publishes a queue holding 1 MiB of waiting text in one message.queue.status_changed its own consumer takes, and refuses a byte more with queue_text_full', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const bus = collectEvents(nc, prefix, [MESSAGE_QUEUE_STATUS_CHANGED]);
    const before = (await listDeadLetters(await jetstreamManager(nc), worker.topology)).length;
    const half = escapingText(PLAN_COMMENT_LIMITS.queueTextMaxBytes / 2);
    for (let i = 0; i < 2; i++) {
      const reply = await client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: half });
      expect(reply).toMatchObject({ ok: true, delivery_kind: 'queued' });
    }
    const over = await client.enqueue({ session_id: task.sessionId, caller_id: randomUUID(), content: 'x' });
    expect(over).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'queue_text_full', content_bytes: PLAN_COMMENT_LIMITS.queueTextMaxBytes + 1 });
    const full = await eventually(
      () => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === task.sessionId && e.data.count === 2),
      20_000,
      'the status event of the full queue',
    );
    expect((full.data.entries as Array<{ content: string }>).every((e) => e.content === half)).toBe(true);
    // The worker's events stream captures it and its consumer settles it without a dead letter.
    const jsm = await jetstreamManager(nc);
    await eventually(async () => {
      const info = await jsm.consumers.info(worker.topology.eventsStream, worker.topology.consumer);
      return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
    });
    expect((await listDeadLetters(jsm, worker.topology)).length).toBe(before);
    bus.stop();
  });
});
