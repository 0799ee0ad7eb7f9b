import { describe, expect, it } from 'vitest';
import { canonicalJson, promptRequestFingerprint, type PromptIdentity } from '../../src/repository/requestFingerprint.js';
import { isUuid, legacyCommentId, previousLegacyCommentId, uuidV5 } from '../../src/repository/planComments/commentIds.js';
import { fenceFor, formatPlanCommentPrompt, normalizeLineEndings, utf8Length, type PromptPlanComment } from '../../src/turns/index.js';

const comment = (id: string, body: string, selected_text = '', created_at = '2026-09-02T10:00:00.000000000Z'): PromptPlanComment => ({
  id,
  body,
  selected_text,
  created_at,
});

describe('formatPlanCommentPrompt', () => {
  it('writes the documented bytes: heading, fenced selection, quoted body, separator, content', () => {
    const prompt = formatPlanCommentPrompt(
      [comment('c1', 'Rename this step.', 'Step 2: migrate'), comment('c2', 'Why two passes?\nOne is enough.', '', '2026-09-02T10:00:01.000000000Z')],
      'Please revise the plan.',
    );
    expect(prompt).toBe(
      '### Plan Comments\n\n' +
        '```\nStep 2: migrate\n```\n> Rename this step.\n\n' +
        '> Why two passes?\n> One is enough.\n\n' +
        '---\n\n' +
        'Please revise the plan.',
    );
  });

  it('orders comments by created_at, then id, whatever order they come in', () => {
    const a = comment('b-later-id', 'first by time', '', '2026-09-02T10:00:00.000001000Z');
    const b = comment('a-early-id', 'second by time', '', '2026-09-02T10:00:00.000002000Z');
    const tieLow = comment('t1', 'tie, lower id', '', '2026-09-02T10:00:00.000003000Z');
    const tieHigh = comment('t2', 'tie, higher id', '', '2026-09-02T10:00:00.000003000Z');
    const expected = formatPlanCommentPrompt([a, b, tieLow, tieHigh], '');
    expect(formatPlanCommentPrompt([tieHigh, b, tieLow, a], '')).toBe(expected);
    expect(expected.indexOf('first by time')).toBeLessThan(expected.indexOf('second by time'));
    expect(expected.indexOf('tie, lower id')).toBeLessThan(expected.indexOf('tie, higher id'));
  });

  it("orders Kandev's SQLite timestamp text by instant beside the canonical form", () => {
    const kandev = comment('k', 'kandev text, earlier', '', '2026-09-02 10:00:00.5+00:00');
    const canonical = comment('c', 'canonical, later', '', '2026-09-02T10:00:00.600000000Z');
    const prompt = formatPlanCommentPrompt([canonical, kandev], '');
    expect(prompt.indexOf('kandev text, earlier')).toBeLessThan(prompt.indexOf('canonical, later'));
  });

  it('fences selected text with one backtick more than its longest run, never fewer than three', () => {
    expect(fenceFor('plain')).toBe('```');
    expect(fenceFor('a `tick` here')).toBe('```');
    expect(fenceFor('```ts\ncode\n```')).toBe('````');
    expect(fenceFor('x `````` y')).toBe('```````');
    const prompt = formatPlanCommentPrompt([comment('c', 'why?', 'before\n```\ninside\n```\nafter')], '');
    expect(prompt).toBe('### Plan Comments\n\n````\nbefore\n```\ninside\n```\nafter\n````\n> why?\n\n');
  });

  it('quotes special characters verbatim: markdown, separators, quotes, dollars, unicode', () => {
    const selected = '> already quoted\n---\n# heading\n$HOME & <tag> "q" \\n é 🚀';
    const prompt = formatPlanCommentPrompt([comment('c', '---\n> nested\n`x`', selected)], 'go');
    expect(prompt).toBe(`### Plan Comments\n\n\`\`\`\n${selected}\n\`\`\`\n> ---\n> > nested\n> \`x\`\n\n---\n\ngo`);
  });

  it('quotes an empty body line as "> " and keeps blank lines inside the selection', () => {
    expect(formatPlanCommentPrompt([comment('c', 'one\n\ntwo', 'a\n\nb')], '')).toBe('### Plan Comments\n\n```\na\n\nb\n```\n> one\n> \n> two\n\n');
  });

  it('gives the block alone for empty or blank content, and the content alone without comments', () => {
    const block = '### Plan Comments\n\n> note\n\n';
    expect(formatPlanCommentPrompt([comment('c', 'note')], '')).toBe(block);
    expect(formatPlanCommentPrompt([comment('c', 'note')], ' \n\t')).toBe(block);
    expect(formatPlanCommentPrompt([], 'just text')).toBe('just text');
    expect(formatPlanCommentPrompt([], '')).toBe('');
  });

  it('normalises CRLF and lone CR to LF in selection, body and content', () => {
    expect(normalizeLineEndings('a\r\nb\rc\n')).toBe('a\nb\nc\n');
    expect(formatPlanCommentPrompt([comment('c', 'x\r\ny', 's\rt')], 'p\r\nq')).toBe(formatPlanCommentPrompt([comment('c', 'x\ny', 's\nt')], 'p\nq'));
  });

  it('measures UTF-8 bytes as the wire does', () => {
    for (const text of ['', 'ascii', 'é', '€', '🚀', 'mixed é€🚀 text']) expect(utf8Length(text)).toBe(Buffer.byteLength(text, 'utf8'));
  });
});

describe('request fingerprints', () => {
  const identity: PromptIdentity = {
    callerId: 'caller-1',
    target: { sessionId: 's1' },
    deliveryKind: 'direct',
    content: 'hi',
    refs: [
      { id: 'b', version: 2 },
      { id: 'a', version: 1 },
    ],
    attachmentIds: ['y', 'x'],
    model: '',
    planMode: false,
  };

  it('is stable across key order and the order of refs and attachment ids', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: null } })).toBe('{"a":{"c":null,"d":[2,{"e":0,"f":1}]},"b":1}');
    const reordered: PromptIdentity = { ...identity, refs: [...identity.refs].reverse(), attachmentIds: [...identity.attachmentIds].reverse() };
    expect(promptRequestFingerprint(reordered)).toBe(promptRequestFingerprint(identity));
  });

  it('changes with every part of the request identity', () => {
    const base = promptRequestFingerprint(identity);
    const variants: PromptIdentity[] = [
      { ...identity, callerId: 'caller-2' },
      { ...identity, target: { sessionId: 's2' } },
      { ...identity, target: { taskId: 's1', requirePrimary: true } },
      { ...identity, content: 'hi!' },
      {
        ...identity,
        refs: [
          { id: 'a', version: 2 },
          { id: 'b', version: 2 },
        ],
      },
      { ...identity, attachmentIds: ['x'] },
      { ...identity, model: 'm' },
      { ...identity, planMode: true },
      { ...identity, deliveryKind: 'queued' },
    ];
    for (const variant of variants) expect(promptRequestFingerprint(variant)).not.toBe(base);
  });

  it("is the same for a Run delivered direct and one queued behind a busy primary: the kind is the service's choice", () => {
    const run: PromptIdentity = { ...identity, target: { taskId: 't1', requirePrimary: true } };
    expect(promptRequestFingerprint({ ...run, deliveryKind: 'queued' })).toBe(promptRequestFingerprint(run));
  });

  it("derives a non-UUID draft's comment id as a UUIDv5 of task, session and draft, stable and distinct", () => {
    const id = legacyCommentId('t', 's', 'd');
    expect(isUuid(id)).toBe(true);
    expect(id[14]).toBe('5');
    expect(legacyCommentId('t', 's', 'd')).toBe(id);
    expect(legacyCommentId('t', 's2', 'd')).not.toBe(id);
    expect(legacyCommentId('t2', 's', 'd')).not.toBe(id);
    expect(legacyCommentId('t', 's', 'd2')).not.toBe(id);
    expect(previousLegacyCommentId('t', 's', 'd')).toMatch(/^legacy:[0-9a-f]{64}$/);
  });

  it("keeps a draft's own UUID, in lower case", () => {
    expect(legacyCommentId('t', 's', '0B8E7C6D-5A4F-4E3D-9C2B-1A0F9E8D7C6B')).toBe('0b8e7c6d-5a4f-4e3d-9c2b-1a0f9e8d7c6b');
  });

  it('computes RFC 9562 UUIDv5 (the DNS namespace example)', () => {
    expect(uuidV5('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'www.example.com')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });
});
