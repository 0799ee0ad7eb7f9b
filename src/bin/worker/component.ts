import type { Logger } from 'pino';

/**
 * One part of a running worker (the event consumer, the endpoints, the health server, ...).
 * `start()` resolves once the part does its job; `stop()` resolves once it stopped and its work
 * in flight settled. The worker calls each at most once.
 */
export interface WorkerComponent {
  /** kebab-case, as in the logs (`workerComponent`). */
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Components that all started; stops them in reverse order of start. */
export interface StartedComponents {
  /** Idempotent: every caller gets the same settled promise. */
  stop(): Promise<void>;
}

/** Stops each component, later ones first; a failing stop does not keep the earlier ones running. */
async function stopInReverse(started: readonly WorkerComponent[], log: Logger): Promise<unknown[]> {
  const errors: unknown[] = [];
  for (const component of [...started].reverse()) {
    try {
      await component.stop();
      log.debug({ workerComponent: component.name }, 'component stopped');
    } catch (err) {
      errors.push(err);
    }
  }
  return errors;
}

/**
 * Starts the components in order. When one fails to start, the ones already started are stopped in
 * reverse order and the start error is thrown (an AggregateError with the stop errors after it if
 * stopping failed too), so a worker that did not start leaves nothing running.
 */
export async function startComponents(components: readonly WorkerComponent[], logger: Logger): Promise<StartedComponents> {
  const log = logger.child({ component: 'worker' });
  const started: WorkerComponent[] = [];
  for (const component of components) {
    try {
      await component.start();
    } catch (err) {
      const stopErrors = await stopInReverse(started, log);
      if (stopErrors.length === 0) throw err;
      throw new AggregateError([err, ...stopErrors], `${component.name} failed to start, and stopping the components started before it failed too`);
    }
    started.push(component);
    log.debug({ workerComponent: component.name }, 'component started');
  }
  let stopped: Promise<void> | undefined;
  return {
    stop() {
      stopped ??= stopInReverse(started, log).then((errors) => {
        if (errors.length === 1) throw errors[0];
        if (errors.length > 1) throw new AggregateError(errors, `${errors.length} worker components failed to stop`);
      });
      return stopped;
    },
  };
}
