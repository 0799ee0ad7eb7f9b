import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/logger.js';
import type { Reply, ReplyFailure } from '../../src/contract/replyErrorCodes.js';
import { serveEndpoint } from '../../src/events/serveEndpoint.js';
import { failure } from '../../src/contract/replies.js';
import { connectTestNats, uniquePrefix } from '../support/nats.js';

/** A reply shaped like the guard's: a failure carries extra fields. */
type ProbeReply = Reply<{ answer: number }> | (ReplyFailure & { blocked: true; live: true });

describe('a request/reply endpoint over a real NATS', () => {
  let nc: NatsConnection;
  let endpoint: ReturnType<typeof serveEndpoint>;
  let subject: string;
  beforeAll(async () => {
    nc = await connectTestNats();
    subject = `${uniquePrefix('endpoint')}probe`;
    endpoint = serveEndpoint({
      nc,
      subject,
      schema: z.object({ mode: z.enum(['ok', 'fail', 'crash', 'huge', 'blip']) }),
      logger: silentLogger(),
      maxRequestBytes: 1024,
      async handler({ mode }): Promise<ProbeReply> {
        if (mode === 'crash') throw new Error('the store went away');
        // What pg rejects a query with when an administrator terminated its backend (57P01).
        if (mode === 'blip') throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
        // Over the server's max_payload (1 MB by default): the connection refuses to send it.
        if (mode === 'huge') return { ok: true, answer: 1, padding: 'p'.repeat(nc.info!.max_payload + 1) } as ProbeReply;
        if (mode === 'fail') return { ...failure('unavailable', 'cannot tell'), blocked: true, live: true };
        return { ok: true, answer: 42 };
      },
    });
    await nc.flush();
  });
  afterAll(async () => {
    await endpoint.stop();
    await nc.drain();
  });

  const ask = async (body: unknown) => (await nc.request(subject, JSON.stringify(body), { timeout: 5000 })).json<Record<string, unknown>>();

  it('sends the reply value the handler returns as it is, a failure with its extra fields included', async () => {
    expect(await ask({ mode: 'ok' })).toEqual({ ok: true, answer: 42 });
    expect(await ask({ mode: 'fail' })).toEqual({ ok: false, error: { code: 'unavailable', message: 'cannot tell' }, blocked: true, live: true });
  });

  it('replies internal to a handler that throws, and keeps answering the next request', async () => {
    expect(await ask({ mode: 'crash' })).toEqual({ ok: false, error: { code: 'internal', message: 'the store went away' } });
    expect(await ask({ mode: 'ok' })).toEqual({ ok: true, answer: 42 });
  });

  it('replies unavailable to a handler that throws a transient failure, as classifyFailure calls it', async () => {
    expect(await ask({ mode: 'blip' })).toEqual({ ok: false, error: { code: 'unavailable', message: 'terminating connection due to administrator command' } });
  });

  it('answers a body the schema refuses with bad_request, without calling the handler', async () => {
    // The handler would answer ok: true to any mode but the two it knows.
    expect(await ask({ mode: 'other' })).toMatchObject({ ok: false, error: { code: 'bad_request' } });
  });

  it('replies internal when the reply is too large to send, instead of ending the process, and keeps answering', async () => {
    expect(await ask({ mode: 'huge' })).toEqual({ ok: false, error: { code: 'internal', message: expect.stringMatching(/reply could not be sent/) } });
    expect(await ask({ mode: 'ok' })).toEqual({ ok: true, answer: 42 });
  });

  it('adds its failure fields to every failure it replies, whichever step failed, and none to a success', async () => {
    const closed = serveEndpoint({
      nc,
      subject: `${subject}_closed`,
      schema: z.object({ mode: z.enum(['ok', 'fail', 'crash', 'huge']) }),
      logger: silentLogger(),
      maxRequestBytes: 1024,
      failureFields: { blocked: true, live: true },
      async handler({ mode }): Promise<ProbeReply> {
        if (mode === 'crash') throw new Error('the store went away');
        if (mode === 'huge') return { ok: true, answer: 1, padding: 'p'.repeat(nc.info!.max_payload + 1) } as ProbeReply;
        if (mode === 'fail') return failure('not_found', 'no such thing') as ProbeReply;
        return { ok: true, answer: 42 };
      },
    });
    try {
      await nc.flush();
      const askClosed = async (body: string) => (await nc.request(`${subject}_closed`, body, { timeout: 5000 })).json<Record<string, unknown>>();
      expect(await askClosed('{"mode": "ok"}')).toEqual({ ok: true, answer: 42 });
      for (const [body, code] of [
        ['{"mode": "fail"}', 'not_found'],
        ['{"mode": "crash"}', 'internal'],
        ['{"mode": "huge"}', 'internal'],
        ['{"mode": 1}', 'bad_request'],
        ['not json', 'bad_request'],
      ] as const) {
        expect(await askClosed(body), body).toEqual({ ok: false, error: { code, message: expect.any(String) }, blocked: true, live: true });
      }
    } finally {
      await closed.stop();
    }
  });
});
