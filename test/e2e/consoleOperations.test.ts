import { randomUUID } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium } from '../support/chromium.js';
import { screenshotOnFailure } from '../support/screenshotOnFailure.js';
import { attr, filterWorkspace, showView, startConsoleStack, taskRowSelector, type ConsoleStack } from '../support/consoleStack.js';
import { describeEachDialect } from '../support/databases.js';
import { envelope, eventually } from '../support/nats.js';
import { privateNatsAvailable } from '../support/privateNats.js';
import { rowWriter, type RowWriter } from '../support/rowWriters.js';

/**
 * The console's operations view in a real browser, signed in as the shipped `ops` user over the
 * shipped WebSocket listener, against a worker on each dialect; and the page's connection through a
 * NATS restart.
 */
describe.skipIf(!chromiumAvailable() || !privateNatsAvailable())('the console as the ops user', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  describeEachDialect('on %s', (dialect) => {
    let stack: ConsoleStack;
    let w: RowWriter;
    screenshotOnFailure(() => stack?.page);

    beforeAll(async () => {
      stack = await startConsoleStack(browser, dialect, 'ops');
      w = rowWriter('owned', stack.t.ctx);
    });
    afterAll(async () => {
      await stack?.stop();
    });

    it('lists a dead letter, shows its original payload and retries it from the page', async () => {
      const { page } = stack;
      const payload = `{ not json ${randomUUID()}`;
      stack.backend.publish('message.added', new TextEncoder().encode(payload));
      await stack.backend.flush();
      const seq = await eventually(
        async () => {
          const listed = await stack.asRole.listDeadLetters({ limit: 100 });
          if (!listed.ok) return undefined;
          for (const record of listed.dead_letters) {
            const shown = await stack.asRole.showDeadLetter({ seq: record.seq });
            if (shown.ok && shown.original?.data === payload) return record.seq;
          }
          return undefined;
        },
        20_000,
        'the dead letter of the malformed event',
      );
      const row = page.locator(`#operations [data-testid=dead-letter][data-seq=${attr(String(seq))}]`);
      // The view reads the list when it is shown: show it again until the new record is there.
      await eventually(
        async () => {
          await showView(page, 'operations');
          return (await row.count()) > 0 ? true : undefined;
        },
        15_000,
        `dead letter ${seq} on the page`,
      );
      await row.locator('[data-action=show]').click();
      const shown = page.locator('#operations [data-testid=dead-letter-payload]');
      await shown.first().waitFor({ timeout: 10_000 });
      expect(await shown.first().innerText()).toContain(payload);

      await row.locator('[data-action=retry]').click();
      await page.locator('#operations [data-testid=reply][data-code=ok]').first().waitFor({ timeout: 15_000 });
      // Re-injected and its record removed (the original, still malformed, dead-letters again under a new seq).
      const after = await stack.asRole.listDeadLetters({ limit: 100 });
      expect(after.ok && after.dead_letters.some((record) => record.seq === seq)).toBe(false);
    });

    it('shows consumer lag, ack-pending and events by outcome, reprojects a task and counts drifted tasks from the page', async () => {
      const { page } = stack;
      const seeded = await w.session();
      await stack.announce(seeded.taskId, seeded.sessionId);
      await showView(page, 'operations');
      for (const testid of ['consumer-lag', 'ack-pending']) {
        await page.waitForFunction((s) => /\d/.test(document.querySelector(s)?.textContent ?? ''), `#operations [data-testid=${testid}]`, { timeout: 15_000 });
      }
      // The announced event was projected: the table's next refresh (every 5 s) counts it.
      await page.waitForFunction(
        () =>
          Number(document.querySelector('#operations [data-testid=events-by-outcome] tr[data-outcome=projected] [data-testid=outcome-total]')?.textContent) >=
          1,
        undefined,
        { timeout: 20_000 },
      );
      await page.locator('input#reproject-task-id').fill(seeded.taskId);
      await page.locator('#operations [data-action=reproject]').click();
      await page.locator('#operations [data-testid=reply][data-code=ok]').first().waitFor({ timeout: 15_000 });
      await page.locator('#operations [data-action=verify]').click();
      await page.waitForFunction(() => /\d/.test(document.querySelector('#operations [data-testid=drift-count]')?.textContent ?? ''), undefined, {
        timeout: 15_000,
      });
    });

    it('says it is disconnected while the nats-server is down, reconnects by itself when it is back, and keeps the board live', async () => {
      const { page } = stack;
      const workspaceId = `ws-${randomUUID()}`;
      const seeded = await w.session({ workspaceId });
      await stack.announce(seeded.taskId, seeded.sessionId);
      await showView(page, 'board');
      await filterWorkspace(page, workspaceId);
      await page.locator(taskRowSelector(seeded.taskId, '')).waitFor({ timeout: 15_000 });

      await stack.nats.halt();
      const connection = page.locator('#connection[data-state=disconnected]');
      await connection.waitFor({ timeout: 15_000 });
      expect(await connection.innerText()).toMatch(/disconnected/i);

      await stack.nats.resume();
      await page.locator('#connection[data-state=connected]').waitFor({ timeout: 30_000 });
      // The test's own backend connection reconnects on its own schedule: a flush fails until it has.
      await eventually(() => stack.backend.flush().then(() => true), 30_000, "the backend's reconnection");
      // The board's watch came back with the connection: a question asked now still shows.
      const turn = await w.startTurn(seeded.sessionId, { startedAt: new Date(Date.now() - 1000).toISOString() });
      await w.bundle({ sessionId: seeded.sessionId, turnId: turn.id, statuses: ['pending'] });
      // The events stream is durable: once the backend's connection is back, the worker gets it.
      await stack.announce(seeded.taskId, seeded.sessionId, { type: 'clarification_request', requests_input: true });
      await page.locator(taskRowSelector(seeded.taskId, 'clarification')).waitFor({ timeout: 30_000 });
    });
  });
});
