import { describe, expect, it } from 'vitest';
import { INBOUND_SUBJECTS } from '../../src/contract/subjects.js';
import { parseEvent } from '../../src/events/parseEvent.js';
import { KANDEV_EVENT_SCHEMAS, kandevEventExamples, kandevEventViolation, PUBLISHED_EVENT_SCHEMAS } from '../support/kandevEventSchemas.js';

const examples = kandevEventExamples();
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const dataOf = (type: string) => (examples.get(type) as { data: Record<string, unknown> }).data;
const withData = (type: string, data: Record<string, unknown>) => ({ ...(examples.get(type) as object), data });

describe('testdata/kandev-events', () => {
  it('holds exactly one example per Kandev event type with a schema, including every type the worker consumes', () => {
    expect([...examples.keys()].sort()).toEqual(Object.keys(KANDEV_EVENT_SCHEMAS).sort());
    for (const subject of INBOUND_SUBJECTS.filter((s) => !s.endsWith('.>'))) expect(examples.has(subject), subject).toBe(true);
  });

  it.each([...examples.keys()])('%s: the example is in Kandev form and the worker accepts it', (type) => {
    const example = examples.get(type);
    expect(kandevEventViolation(type, example)).toBeNull();
    expect(parseEvent(encode(example), 1 << 20)).toMatchObject({ ok: true });
  });

  it.each(Object.keys(KANDEV_EVENT_SCHEMAS))('%s: the schema refuses the example without any one of its required fields', (type) => {
    const required = Object.entries(KANDEV_EVENT_SCHEMAS[type]!.shape).filter(([, field]) => !field.safeParse(undefined).success);
    expect(required.length).toBeGreaterThan(0);
    for (const [key] of required) {
      const { [key]: _dropped, ...rest } = dataOf(type);
      expect(kandevEventViolation(type, withData(type, rest)), key).toMatch(new RegExp(key));
    }
  });

  it('refuses fields of another type than Kandev has: a numeric epoch, a boolean-less flag, an envelope of another type', () => {
    const pending = dataOf('session.pending_action_changed');
    expect(
      kandevEventViolation(
        'session.pending_action_changed',
        withData('session.pending_action_changed', { ...pending, pending_action_revision: { epoch: 1, sequence: 1 } }),
      ),
    ).toMatch(/epoch/);
    const queue = dataOf('message.queue.status_changed');
    expect(kandevEventViolation('message.queue.status_changed', withData('message.queue.status_changed', { ...queue, auto_run: 1 }))).toMatch(/auto_run/);
    expect(kandevEventViolation('message.added', { ...(examples.get('message.added') as object), type: 'message.updated' })).toMatch(/envelope type/);
    expect(kandevEventViolation('some.other_event', {})).toBeNull();
  });

  it('keeps the schemas open: a field Kandev does not have may be added', () => {
    for (const type of Object.keys(PUBLISHED_EVENT_SCHEMAS)) expect(kandevEventViolation(type, withData(type, { ...dataOf(type), extra: 1 }))).toBeNull();
  });
});
