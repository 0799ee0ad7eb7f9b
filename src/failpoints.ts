import type { Logger } from 'pino';

/**
 * Test-only failpoints (gofail style): named boundaries in the prompt path where an end-to-end
 * test stops a worker process for good, to `kill -9` it exactly there. Set through
 * PENDING_PROJECTOR_FAILPOINTS (config.ts), e.g. `after_reserve=hang,after_publish=hang`; unset,
 * every `reach` resolves at once and costs nothing. `hang` logs `failpoint reached <name>` and
 * never resolves, so the test can wait for that line before it kills the process.
 */

/** The boundaries of a prompt's delivery, in order: test/e2e/promptDeliveryCrashes.test.ts kills the worker at each one and checks no prompt is delivered twice. */
const FAILPOINT_NAMES = ['after_accept_commit', 'after_reserve', 'after_transcript', 'after_marker_commit', 'after_publish'] as const;
type FailpointName = (typeof FAILPOINT_NAMES)[number];

export interface Failpoints {
  /** Resolves at once unless `name` is armed; an armed `hang` never resolves. */
  reach(name: FailpointName): Promise<void>;
}

export const NO_FAILPOINTS: Failpoints = { reach: () => Promise.resolve() };

/** The failpoints of a `name=hang,...` setting; unknown names are refused, so a typo never passes silently. */
export function createFailpoints(setting: string, logger: Logger): Failpoints {
  if (setting === '') return NO_FAILPOINTS;
  const armed = new Set<string>();
  for (const pair of setting.split(',')) {
    const [name, action] = pair.split('=');
    if (!(FAILPOINT_NAMES as readonly string[]).includes(name!) || action !== 'hang')
      throw new Error(`unknown failpoint ${JSON.stringify(pair)}; known: ${FAILPOINT_NAMES.join(', ')} (=hang)`);
    armed.add(name!);
  }
  const log = logger.child({ component: 'failpoints' });
  log.warn({ failpoints: [...armed] }, 'test failpoints armed');
  return {
    reach(name) {
      if (!armed.has(name)) return Promise.resolve();
      log.warn({ failpoint: name }, `failpoint reached ${name}`);
      return new Promise<void>(() => undefined);
    },
  };
}
