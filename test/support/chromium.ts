import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { REQUIRE_INTEGRATION } from './services.js';

/**
 * Debian's chromium driven by playwright-core: the browser is the machine's package (.ci/run
 * installs it), never one playwright downloads.
 */

/** The chromium binary: CHROMIUM_BIN, else Debian's. */
const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

/**
 * Whether chromium is installed. Under a truthy CI or REQUIRE_INTEGRATION a missing one throws, so the
 * browser tests fail instead of being skipped.
 */
export function chromiumAvailable(): boolean {
  const found = existsSync(CHROMIUM_BIN);
  if (!found && REQUIRE_INTEGRATION)
    throw new Error(`chromium is not installed at ${CHROMIUM_BIN} (apt-get install chromium), and CI / REQUIRE_INTEGRATION require the browser tests`);
  return found;
}

// No network beyond the test's own servers: no QUIC, no component or sync traffic. playwright gives
// every launch a fresh temporary profile (the --user-data-dir it passes), removed on close.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Launches headless chromium; close it in afterAll (its process counts as a leak otherwise). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_BIN, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
}
