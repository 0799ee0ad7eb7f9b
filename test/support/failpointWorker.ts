import { loadConfig } from '../../src/config.js';
import { describeFailure } from '../../src/bin/commandFailure.js';
import { WORKER_SETTINGS } from '../../src/bin/commandSettings.js';
import { runWorkerCommand } from '../../src/bin/workerCommand.js';
import { createLogger } from '../../src/logger.js';
import { createFailpoints } from './failpoints.js';

/**
 * `pending-projector worker` with failpoints armed, for the crash tests alone:
 * `node --import tsx test/support/failpointWorker.ts <name=hang,...>`, configured by the
 * environment as the worker command is. The production CLI has no way to arm a failpoint, so this
 * entry, which only the test tree holds, is the one way to stop a worker at a named boundary.
 */
const [setting = ''] = process.argv.slice(2);
try {
  const config = loadConfig({}, process.env, WORKER_SETTINGS);
  // The worker command builds its own logger; this one only announces what is armed and reached, on the same stream.
  const failpoints = createFailpoints(setting, createLogger(config.logLevel));
  process.exitCode = await runWorkerCommand(config, { failpoints });
} catch (err) {
  const { text, exitCode } = describeFailure(err, undefined);
  process.stderr.write(text);
  process.exitCode = exitCode;
}
