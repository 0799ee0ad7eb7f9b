import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { SIGNAL_REPEAT_MS, watchShutdownSignals, type ShutdownSignal, type SignalSource } from '../../src/bin/shutdownSignals.js';

function harness() {
  const source = new EventEmitter();
  let nowMs = 5_000;
  const calls: string[] = [];
  const dispose = watchShutdownSignals(
    { stop: (signal) => calls.push(`stop ${signal}`), force: (signal) => calls.push(`force ${signal}`) },
    source as SignalSource,
    () => nowMs,
  );
  return {
    calls,
    dispose,
    send: (signal: ShutdownSignal, atMs: number) => {
      nowMs = atMs;
      source.emit(signal);
    },
    listeners: () => source.listenerCount('SIGTERM') + source.listenerCount('SIGINT'),
  };
}

describe('watchShutdownSignals', () => {
  it('stops on the first SIGTERM or SIGINT', () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const h = harness();
      h.send(signal, 5_000);
      expect(h.calls).toEqual([`stop ${signal}`]);
    }
  });

  it('takes a Ctrl-C that reaches the process twice (terminal and npm) as one request to stop', () => {
    const h = harness();
    h.send('SIGINT', 5_000);
    h.send('SIGINT', 5_003);
    h.send('SIGINT', 5_000 + SIGNAL_REPEAT_MS - 1);
    expect(h.calls).toEqual(['stop SIGINT']);
  });

  it('forces on a signal that comes separately, a repeat interval or more after the first', () => {
    const h = harness();
    h.send('SIGTERM', 5_000);
    h.send('SIGTERM', 5_001);
    h.send('SIGINT', 5_000 + SIGNAL_REPEAT_MS);
    expect(h.calls).toEqual(['stop SIGTERM', 'force SIGINT']);
  });

  it('removes its listeners when disposed', () => {
    const h = harness();
    expect(h.listeners()).toBe(2);
    h.dispose();
    expect(h.listeners()).toBe(0);
  });
});
