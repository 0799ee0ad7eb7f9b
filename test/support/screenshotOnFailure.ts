import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { beforeEach } from 'vitest';

/** Screenshots of failed browser tests (gitignored). */
const SCREENSHOT_DIR = fileURLToPath(new URL('../../test-results/', import.meta.url));

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
