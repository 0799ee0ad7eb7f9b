import { randomUUID } from 'node:crypto';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsTurnStartHook } from '../../src/events/prompts/natsTurnStartHook.js';
import { createTaskAdmission, type TaskAdmission } from '../../src/repository/admission/taskAdmission.js';
import type { TurnStartRequest } from '../../src/services/prompts/turnStartHook.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createGate } from '../support/gate.js';
import { connectTestNats, eventually, uniquePrefix } from '../support/nats.js';

const request = (taskId: string): TurnStartRequest => ({
  task_id: taskId,
  session_id: `session-${randomUUID()}`,
  caller_id: `caller-${randomUUID()}`,
  delivery_kind: 'direct',
});

/** A hook service on the real bus: every request is recorded and answered by `answer`. */
function serveHook(nc: NatsConnection, subject: string, answer: (msg: Msg) => unknown): { requests: unknown[]; stop(): void } {
  const requests: unknown[] = [];
  const sub = nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      requests.push(msg.json());
      void answer(msg);
    },
  });
  return { requests, stop: () => sub.unsubscribe() };
}

describe('the turn-start hook over NATS request/reply', () => {
  let nc: NatsConnection;
  const subject = () => `${uniquePrefix('hook')}kandev.turn_start`;
  beforeAll(async () => {
    nc = await connectTestNats();
  });
  afterAll(async () => {
    await nc?.drain();
  });

  it('lets admission go on when the hook replies {"ok": true}, and sends it task, session, caller id and delivery kind', async () => {
    const hookSubject = subject();
    const service = serveHook(nc, hookSubject, (msg) => msg.respond(JSON.stringify({ ok: true })));
    try {
      const sent = request('task-1');
      expect(await new NatsTurnStartHook(nc, hookSubject, 5_000).beforePrompt(sent)).toEqual({ ok: true });
      expect(service.requests).toEqual([sent]);
    } finally {
      service.stop();
    }
  });

  it('reports a hook that never replies as the timeout outcome', async () => {
    const hookSubject = subject();
    const service = serveHook(nc, hookSubject, () => undefined);
    try {
      expect(await new NatsTurnStartHook(nc, hookSubject, 200).beforePrompt(request('task-1'))).toEqual({
        ok: false,
        reason: 'timeout',
        detail: 'the turn-start hook did not reply within 200 ms',
      });
      expect(service.requests).toHaveLength(1);
    } finally {
      service.stop();
    }
  });

  it('reports an error reply, any other reply and invalid JSON as the rejected outcome', async () => {
    const replies = [
      JSON.stringify({ ok: false, error: { code: 'unavailable', message: 'workspace not ready' } }),
      JSON.stringify({ ok: 'yes' }),
      JSON.stringify(null),
      'not json',
    ];
    for (const reply of replies) {
      const hookSubject = subject();
      const service = serveHook(nc, hookSubject, (msg) => msg.respond(reply));
      try {
        const outcome = await new NatsTurnStartHook(nc, hookSubject, 5_000).beforePrompt(request('task-1'));
        expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
        if (reply.includes('workspace not ready')) expect(outcome).toMatchObject({ detail: expect.stringContaining('workspace not ready') });
      } finally {
        service.stop();
      }
    }
  });

  it('reports a configured hook that nobody serves as the no-responders outcome', async () => {
    expect(await new NatsTurnStartHook(nc, subject(), 5_000).beforePrompt(request('task-1'))).toMatchObject({ ok: false, reason: 'no_responders' });
  });
});

describeEachDialect('the turn-start hook inside the admission lease on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let admission: TaskAdmission;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    admission = createTaskAdmission(t.db, { lockTimeoutMs: 10_000 });
  });
  afterAll(async () => {
    await nc?.drain();
    await t?.close();
  });

  const written = async (key: string) => (await t.ctx.knex('kandev_meta').where({ key }).first()) !== undefined;

  it('keeps the lease held while the hook is held: an edit of the task waits for the reply', async () => {
    const hookSubject = `${uniquePrefix('hook')}kandev.turn_start`;
    const reply = createGate();
    const events: string[] = [];
    const service = serveHook(nc, hookSubject, async (msg) => {
      events.push('hook called');
      await reply.opened;
      events.push('hook replies');
      msg.respond(JSON.stringify({ ok: true }));
    });
    const hook = new NatsTurnStartHook(nc, hookSubject, 20_000);
    const taskId = `task-${randomUUID()}`;
    const key = randomUUID();
    try {
      const send = admission.withLease(taskId, () => hook.beforePrompt(request(taskId)));
      await eventually(() => (events.includes('hook called') ? true : undefined));
      const edit = admission.withMutation(t.ctx, taskId, async (tx) => {
        events.push('edit runs');
        await tx.knex('kandev_meta').insert({ key, value: 'edited' });
      });
      await eventually(() => (admission.waiting(taskId) === 1 ? true : undefined), 10_000, 'the edit to queue behind the lease');
      expect(await written(key)).toBe(false);
      reply.open();
      expect(await send).toEqual({ ok: true, value: { ok: true } });
      expect(await edit).toEqual({ ok: true, value: undefined });
      expect(events).toEqual(['hook called', 'hook replies', 'edit runs']);
    } finally {
      service.stop();
    }
  });

  it('releases the lease once a hook that never replies timed out: the next edit goes through at once', async () => {
    const hookSubject = `${uniquePrefix('hook')}kandev.turn_start`;
    const service = serveHook(nc, hookSubject, () => undefined);
    const taskId = `task-${randomUUID()}`;
    const key = randomUUID();
    try {
      const outcome = await admission.withLease(taskId, () => new NatsTurnStartHook(nc, hookSubject, 300).beforePrompt(request(taskId)));
      expect(outcome).toMatchObject({ ok: true, value: { ok: false, reason: 'timeout' } });
      const quick = createTaskAdmission(t.db, { lockTimeoutMs: 50 });
      expect(await quick.withMutation(t.ctx, taskId, (tx) => tx.knex('kandev_meta').insert({ key, value: 'edited' }))).toMatchObject({ ok: true });
      expect(await written(key)).toBe(true);
    } finally {
      service.stop();
    }
  });
});
