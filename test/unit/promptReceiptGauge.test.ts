import { describe, expect, it } from 'vitest';
import { createMetrics, type PromptReceiptCount } from '../../src/metrics.js';

const series = async (metrics: ReturnType<typeof createMetrics>) =>
  Object.fromEntries((await metrics.promptReceipts.get()).values.map((v) => [`${v.labels.kind}/${v.labels.state}`, v.value]));

describe('the prompt receipt gauge', () => {
  it('is read at scrape time, once per max age however often it is scraped', async () => {
    const metrics = createMetrics();
    let reads = 0;
    metrics.readPromptReceiptsFrom({
      read: async () => {
        reads++;
        return [{ kind: 'queued', state: 'waiting', count: reads }];
      },
      maxAgeMs: 3_600_000,
      onError: (err) => {
        throw err;
      },
    });
    expect(reads).toBe(0);
    await metrics.registry.metrics();
    await Promise.all([metrics.registry.metrics(), metrics.registry.metrics()]);
    expect(reads).toBe(1);
    expect(await series(metrics)).toEqual({ 'queued/waiting': 1 });
  });

  it('reads again once its last read is older than the max age', async () => {
    const metrics = createMetrics();
    let reads = 0;
    metrics.readPromptReceiptsFrom({ read: async () => [{ kind: 'direct', state: 'reserved', count: ++reads }], maxAgeMs: 0, onError: () => undefined });
    await metrics.registry.metrics();
    await metrics.registry.metrics();
    expect(await series(metrics)).toEqual({ 'direct/reserved': 3 });
  });

  it('keeps its last values when a read fails, reports the failure, and the scrape still answers', async () => {
    const metrics = createMetrics();
    const errors: unknown[] = [];
    let next: () => Promise<PromptReceiptCount[]> = async () => [{ kind: 'queued', state: 'waiting', count: 2 }];
    metrics.readPromptReceiptsFrom({ read: () => next(), maxAgeMs: 0, onError: (err) => errors.push(err) });
    await metrics.registry.metrics();
    next = () => Promise.reject(new Error('the database is gone'));
    const text = await metrics.registry.metrics();
    expect(text).toContain('pending_projector_prompt_receipts{kind="queued",state="waiting"} 2');
    expect(errors).toEqual([new Error('the database is gone')]);
  });

  it('has no series on a database without receipts', async () => {
    const metrics = createMetrics();
    metrics.readPromptReceiptsFrom({ read: async () => undefined, maxAgeMs: 0, onError: () => undefined });
    expect(await series(metrics)).toEqual({});
  });
});
