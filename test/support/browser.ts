import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { beforeEach } from 'vitest';
import { REQUIRE_INTEGRATION } from './services.js';

/**
 * Debian's chromium driven by playwright-core: the browser is the machine's package (.ci/run
 * installs it), never one playwright downloads.
 */

/** The chromium binary: CHROMIUM_BIN, else Debian's. */
export const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

/** Screenshots of failed browser tests (gitignored). */
export const SCREENSHOT_DIR = fileURLToPath(new URL('../../test-results/', import.meta.url));

/**
 * Whether chromium is installed. Under a truthy CI or REQUIRE_INTEGRATION a missing one throws, so the
 * browser tests fail instead of being skipped.
 */
export function chromiumAvailable(): boolean {
  const found = existsSync(CHROMIUM_BIN);
  if (!found && REQUIRE_INTEGRATION) throw new Error(`chromium is not installed at ${CHROMIUM_BIN} (apt-get install chromium), and CI / REQUIRE_INTEGRATION require the browser tests`);
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

/** A file-name-safe form of a test's name. */
const slug = (text: string) =>
  text
    .replace(/[^A-Za-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 120);

/**
 * Call inside a describe: when one of its tests fails, the page `current()` returns (if any) is
 * saved as test-results/<describe>-<test>.png, so a red CI run shows what the browser showed.
 */
export function screenshotOnFailure(current: () => Page | undefined): void {
  beforeEach((context) => {
    context.onTestFailed(async () => {
      const page = current();
      if (!page || page.isClosed()) return;
      mkdirSync(SCREENSHOT_DIR, { recursive: true });
      const name = slug(`${context.task.suite?.name ?? ''}-${context.task.name}`);
      await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true }).catch(() => undefined);
    });
  });
}
