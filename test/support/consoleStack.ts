import type { NatsConnection } from '@nats-io/transport-node';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { connectNats } from '../../src/bin/connectNats.js';
import { startWorker, type WorkerConfig, type WorkerHandle } from '../../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { silentLogger } from '../../src/logger.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { openTestDatabase, type TestDatabase } from './databases.js';
import { freePort } from './freePort.js';
import { childEnv, spawnLong, type LongProcess } from './sandboxProcess.js';
import { rolePasswords, startShippedNats, type ShippedNats, type ShippedRole } from './shippedNats.js';
import { envelope } from './nats.js';
import { testWorkerConfig } from './workerConfig.js';

/**
 * What a console browser test runs against: deploy/nats as shipped on a private server with its
 * WebSocket listener, a worker (in this process, as the `worker` user) on a database of the dialect,
 * `pending-projector console` as a real process pointing the browser at that listener, and a page
 * signed in through the console's login form as `role`. `backend` is Kandev's backend's
 * connection (it publishes the events the worker consumes and may call every endpoint).
 */
export interface ConsoleStack {
  readonly t: TestDatabase;
  readonly nats: ShippedNats;
  readonly passwords: Record<ShippedRole, string>;
  readonly backend: NatsConnection;
  /** The endpoints as Kandev's backend calls them. */
  readonly client: PendingProjectorClient;
  /** The endpoints as the page's user calls them (another person at another console). */
  readonly asRole: PendingProjectorClient;
  readonly consoleUrl: string;
  readonly page: Page;
  /** The console process's output so far (for failure messages). */
  consoleOutput(): string;
  /** Kandev's backend announcing a change of `taskId` (`message.added`: the worker rereads the task). */
  announce(taskId: string, sessionId: string, data?: Record<string, unknown>): Promise<void>;
  stop(): Promise<void>;
}

export async function startConsoleStack(
  browser: Browser,
  dialect: DialectName,
  role: 'ui' | 'ops',
  workerOverrides: Partial<WorkerConfig> = {},
): Promise<ConsoleStack> {
  const passwords = rolePasswords();
  const closers: Array<() => Promise<unknown>> = [];
  const stop = async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  };
  try {
    const nats = await startShippedNats(passwords);
    closers.push(() => nats.stop());
    const connectAs = async (user: ShippedRole) => {
      const nc = await connectNats(
        { natsUrl: `nats://${user}:${passwords[user]}@127.0.0.1:${nats.port}`, natsInboxPrefix: `_INBOX_${user}` },
        `console-test-${user}`,
      );
      closers.push(() => nc.close());
      return nc;
    };
    const t = await openTestDatabase(dialect, undefined, { file: dialect === 'sqlite' });
    closers.push(() => t.close());
    const workerNc = await connectAs('worker');
    const worker: WorkerHandle = await startWorker({
      db: t.db,
      nc: workerNc,
      logger: silentLogger(),
      config: testWorkerConfig('', { natsInboxPrefix: '_INBOX_worker', ...workerOverrides }),
    });
    closers.push(() => worker.stop());
    const [backend, roleNc] = await Promise.all([connectAs('backend'), connectAs(role)]);
    const consolePort = await freePort();
    const consoleProcess: LongProcess = spawnLong(
      ['console'],
      childEnv({ CONSOLE_PORT: String(consolePort), CONSOLE_HOST: '127.0.0.1', CONSOLE_NATS_URL: nats.websocketUrl, SUBJECT_PREFIX: '', LOG_LEVEL: 'warn' }),
      { cli: true },
    );
    closers.push(() => consoleProcess.stop());
    await consoleProcess.waitFor(new RegExp(`http://127\\.0\\.0\\.1:${consolePort}`), 60_000);
    const consoleUrl = `http://127.0.0.1:${consolePort}/`;
    const context: BrowserContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    closers.push(() => context.close());
    const page = await context.newPage();
    await signIn(page, consoleUrl, role, passwords[role]);
    return {
      t,
      nats,
      passwords,
      backend,
      client: createPendingProjectorClient(backend, { prefix: '', timeoutMs: 20_000 }),
      asRole: createPendingProjectorClient(roleNc, { prefix: '', timeoutMs: 20_000 }),
      consoleUrl,
      page,
      consoleOutput: () => consoleProcess.output(),
      announce: async (taskId, sessionId, data = {}) => {
        backend.publish('message.added', envelope('message.added', { task_id: taskId, session_id: sessionId, ...data }));
        await backend.flush();
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Opens the console with no credentials, as a first visit does: the bus refuses the anonymous
 * connection, the login form shows, and the user signs in.
 */
async function signIn(page: Page, url: string, user: string, password: string): Promise<void> {
  await page.goto(url);
  const form = page.locator('form#login');
  await form.waitFor({ state: 'visible', timeout: 20_000 });
  await form.locator('input[name=user]').fill(user);
  await form.locator('input[name=password]').fill(password);
  await form.locator('button[type=submit]').click();
  await page.locator('#connection[data-state=connected]').waitFor({ state: 'attached', timeout: 20_000 });
}

/** Shows one of the console's views through its navigation. */
export async function showView(page: Page, view: 'board' | 'questions' | 'operations'): Promise<void> {
  await page.locator(`nav#nav [data-view=${view}]`).click();
  await page.locator(`#${view}`).waitFor({ state: 'visible', timeout: 10_000 });
}

/** A CSS attribute value, quoted. */
export const attr = (value: string) => JSON.stringify(value);

/** The board's row of `taskId`, optionally only while its badge says `pending` ('' for none). */
export function taskRowSelector(taskId: string, pending?: string): string {
  return `#board [data-testid=task-row][data-task-id=${attr(taskId)}]${pending === undefined ? '' : `[data-pending=${attr(pending)}]`}`;
}

/** Narrows the board to one workspace, waiting for its option (the board learns workspaces from the tasks it sees). */
export async function filterWorkspace(page: Page, workspaceId: string): Promise<void> {
  const select = page.locator('select#workspace-filter');
  await select.locator(`option[value=${attr(workspaceId)}]`).waitFor({ state: 'attached', timeout: 15_000 });
  await select.selectOption(workspaceId);
}

/** Waits until exactly `count` elements match `selector` (the DOM is polled by the browser). */
export async function waitForCount(page: Page, selector: string, count: number, timeoutMs = 10_000): Promise<void> {
  await page.waitForFunction(([s, n]) => document.querySelectorAll(s as string).length === n, [selector, count] as const, { timeout: timeoutMs });
}
