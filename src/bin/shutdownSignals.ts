/** The signals that ask a long-running command to stop. */
const SHUTDOWN_SIGNALS = ['SIGTERM', 'SIGINT'] as const;
export type ShutdownSignal = (typeof SHUTDOWN_SIGNALS)[number];

/**
 * How long after the first shutdown signal another one is still the same request. One Ctrl-C under
 * `npm run` reaches the process twice, a few milliseconds apart: from the terminal, which signals the
 * whole foreground process group, and again from npm, which forwards what it receives to its child.
 * A supervisor that signals a whole process group or cgroup (systemd's default) does the same.
 */
export const SIGNAL_REPEAT_MS = 1000;

/** What `watchShutdownSignals` listens on: `process` in production. */
export interface SignalSource {
  on(signal: ShutdownSignal, listener: () => void): unknown;
  off(signal: ShutdownSignal, listener: () => void): unknown;
}

export interface ShutdownSignalHandlers {
  /** The first request to stop: begin a graceful shutdown. */
  stop(signal: ShutdownSignal): void;
  /** A later, separate request while stopping: give up on the graceful shutdown. */
  force(signal: ShutdownSignal): void;
}

/**
 * Calls `stop` on the first SIGTERM or SIGINT and `force` on a signal that arrives
 * `SIGNAL_REPEAT_MS` or more after it; signals in between are the first one delivered again and are
 * ignored. Returns a function that removes the listeners.
 */
export function watchShutdownSignals(
  handlers: ShutdownSignalHandlers,
  source: SignalSource = process,
  nowMs: () => number = () => performance.now(),
): () => void {
  let firstAtMs: number | undefined;
  const listeners = SHUTDOWN_SIGNALS.map((signal) => {
    const listener = () => {
      if (firstAtMs === undefined) {
        firstAtMs = nowMs();
        handlers.stop(signal);
      } else if (nowMs() - firstAtMs >= SIGNAL_REPEAT_MS) {
        handlers.force(signal);
      }
    };
    source.on(signal, listener);
    return [signal, listener] as const;
  });
  return () => {
    for (const [signal, listener] of listeners) source.off(signal, listener);
  };
}
