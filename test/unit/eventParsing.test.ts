import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { parseEvent } from '../../src/events/parseEvent.js';
import { eventTypeOf, topologyFor } from '../../src/contract/subjects.js';
import { retryDelayMs } from '../../src/events/natsEventConsumer.js';
import { relevanceOf } from '../../src/projectors/eventRelevance.js';
import { MAX_ID_LENGTH } from '../../src/storableText.js';

const bytes = (value: unknown) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));

describe('inbound events', () => {
  it('accepts Kandev envelopes and keeps fields it does not need', () => {
    const parsed = parseEvent(
      bytes({ id: '1', type: 'message.added', subject: 'message.added', source: 'kandev', timestamp: 't', data: { task_id: 'a', extra: [1] } }),
      1024,
    );
    expect(parsed).toMatchObject({ ok: true, data: { task_id: 'a', extra: [1] } });
  });

  it('names the reason for every rejection', () => {
    expect(parseEvent(bytes('x'.repeat(2000)), 1024)).toMatchObject({ ok: false, reason: 'too_large' });
    expect(parseEvent(bytes('{nope'), 1024)).toMatchObject({ ok: false, reason: 'invalid_json' });
    expect(parseEvent(new Uint8Array([0xff, 0xfe]), 1024)).toMatchObject({ ok: false, reason: 'invalid_json' });
    expect(parseEvent(bytes({ type: 'message.added', data: {} }), 1024)).toMatchObject({ ok: false, reason: 'invalid_envelope' });
    expect(parseEvent(bytes({ id: '1', type: 'x', data: { task_id: 7 } }), 1024)).toMatchObject({ ok: false, reason: 'invalid_envelope' });
    expect(parseEvent(bytes({ id: '1', type: 'x', data: [] }), 1024)).toMatchObject({ ok: false, reason: 'invalid_envelope' });
  });

  it.each([
    ['a NUL byte in task_id', { task_id: 'task\u0000' }],
    ['a NUL byte in session_id', { session_id: '\u0000' }],
    ['a lone high surrogate', { task_id: 'task\ud800' }],
    ['a lone low surrogate', { session_id: '\udc00session' }],
    ['a surrogate pair in the wrong order', { task_id: '\ude00\ud83d' }],
    ['an id one longer than the limit', { task_id: 'x'.repeat(MAX_ID_LENGTH + 1) }],
    ['a 10 KB id', { session_id: 'x'.repeat(10 * 1024) }],
    ['an empty id', { task_id: '' }],
  ])('refuses %s as invalid_id, before any SQL', (_label, data) => {
    // Written as JSON escapes, as a producer would send them; the bytes themselves are valid UTF-8.
    const parsed = parseEvent(bytes({ id: '1', type: 'task.updated', data }), 64 * 1024);
    expect(parsed).toMatchObject({ ok: false, reason: 'invalid_id', detail: expect.stringMatching(/task_id|session_id/) });
  });

  it('accepts ids at the length limit and any well-formed Unicode', () => {
    for (const id of ['x'.repeat(MAX_ID_LENGTH), '6f0c7a52-9d1e-4f0b-8c1a-2b3c4d5e6f70', 'tâche-😀', 'a b\tc']) {
      expect(parseEvent(bytes({ id: '1', type: 'task.updated', data: { task_id: id, session_id: id } }), 64 * 1024)).toMatchObject({
        ok: true,
        data: { task_id: id },
      });
    }
  });

  it('keeps invalid_envelope for an id of the wrong type, and for a bad id beside another violation', () => {
    expect(parseEvent(bytes({ id: '1', type: 'x', data: { session_id: null } }), 1024)).toMatchObject({ ok: false, reason: 'invalid_envelope' });
    expect(parseEvent(bytes({ id: '1', type: 'x', data: { task_id: 7, session_id: '\u0000' } }), 1024)).toMatchObject({
      ok: false,
      reason: 'invalid_envelope',
    });
  });

  it('checks only the length of the envelope id, which never reaches SQL', () => {
    expect(parseEvent(bytes({ id: 'e\u0000', type: 'x', data: {} }), 1024)).toMatchObject({ ok: true });
    expect(parseEvent(bytes({ id: 'x'.repeat(MAX_ID_LENGTH + 1), type: 'x', data: {} }), 1024)).toMatchObject({ ok: false, reason: 'invalid_envelope' });
  });

  it('refuses bytes that are not UTF-8 even inside a JSON string', () => {
    const prefix = new TextEncoder().encode('{"id":"1","type":"x","data":{"task_id":"a');
    const suffix = new TextEncoder().encode('"}}');
    for (const bad of [[0xc3], [0xed, 0xa0, 0x80], [0x80]]) {
      expect(parseEvent(new Uint8Array([...prefix, ...bad, ...suffix]), 1024)).toMatchObject({ ok: false, reason: 'invalid_json' });
    }
  });

  it('reads streaming updates of ordinary messages as irrelevant, pending-shaped ones as relevant', () => {
    expect(relevanceOf('message.updated', { type: 'message' })).toBe('skip');
    expect(relevanceOf('message.deleted', {})).toBe('skip');
    expect(relevanceOf('message.updated', { type: 'clarification_request' })).toBe('project');
    expect(relevanceOf('message.deleted', { type: 'permission_request' })).toBe('project');
    expect(relevanceOf('message.updated', { requests_input: true })).toBe('project');
    expect(relevanceOf('message.added', { type: 'message' })).toBe('project');
    expect(relevanceOf('permission_request.received.tool', {})).toBe('project');
    expect(relevanceOf('task.deleted', { task_id: 'x' })).toBe('skip');
    expect(relevanceOf('task.archived', {})).toBe('unknown_type');
  });

  it('derives every name from the prefix and strips it from subjects', () => {
    const t = topologyFor('acme.');
    expect(t.eventsStream).toBe('ACME_PENDING_PROJECTOR_EVENTS');
    expect(t.summarySubject).toBe('acme.task.status_summary.updated');
    expect(t.serviceSubject('summary.get')).toBe('acme.pending_projector.v1.summary.get');
    expect(t.inboundSubjects).toContain('acme.message.added');
    expect(eventTypeOf('acme.turn.started', 'acme.')).toBe('turn.started');
    expect(topologyFor('').consumer).toBe('pending-projector');
  });

  it('backs off naks by delivery count, capped at 30 s', () => {
    expect(retryDelayMs(1)).toBe(250);
    expect(retryDelayMs(2)).toBe(500);
    expect(retryDelayMs(20)).toBe(30_000);
  });
});

describe('configuration', () => {
  it('lets a flag win over the environment and the environment over the default', () => {
    expect(loadConfig({}, {}).natsUrl).toBe('nats://127.0.0.1:4222');
    expect(loadConfig({}, { NATS_URL: 'nats://env:4222' }).natsUrl).toBe('nats://env:4222');
    expect(loadConfig({ 'nats-url': 'nats://flag:4222' }, { NATS_URL: 'nats://env:4222' }).natsUrl).toBe('nats://flag:4222');
    expect(loadConfig({}, { BOOT_RECONCILE: 'false' }).bootReconcile).toBe(false);
  });

  it('lists every bad setting at once with both ways to set it', () => {
    try {
      loadConfig({ concurrency: '0' }, { HEALTH_PORT: 'abc', SUBJECT_PREFIX: 'no-dot', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const name of ['CONCURRENCY / --concurrency', 'HEALTH_PORT / --health-port', 'SUBJECT_PREFIX / --subject-prefix', 'LOG_LEVEL / --log-level']) {
        expect(problems).toContain(name);
      }
    }
  });
});
