import type { Logger } from 'pino';
import { FAILPOINT_NAMES, NO_FAILPOINTS, type Failpoints } from '../../src/failpoints.js';

/**
 * The failpoints of a `name=hang,...` setting; unknown names and actions are refused, so a typo
 * never passes silently. `hang` logs `failpoint reached <name>` and never resolves, so a test can
 * wait for that line before it kills the process.
 */
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
