import { Board } from './board.js';
import { ConsoleConnection, showConnectionState, type ConsoleConfig, type ConsoleSession } from './connection.js';
import { byId } from './dom.js';
import { Operations } from './operations.js';
import { Questions } from './questions.js';
import { TaskDetail } from './taskDetail.js';

/**
 * The console page: a reference UI subscriber of the bus contract and the operator's view of the
 * service. It reads its NATS URL, subject prefix and bucket from `/config.json`, then connects to
 * NATS over WebSocket itself; the server that serves it holds no connection.
 */

type View = 'board' | 'questions' | 'operations';
const OPERATIONS_REFRESH_MS = 5000;
const DETAIL_RELOAD_MS = 300;

async function start(): Promise<void> {
  const response = await fetch('config.json', { cache: 'no-store' });
  const config = (await response.json()) as ConsoleConfig;
  let view: View = 'board';
  let session: ConsoleSession | undefined;
  let detailReload: ReturnType<typeof setTimeout> | undefined;

  const detail = new TaskDetail(undefined);
  const questions = new Questions();
  const operations = new Operations();
  const board = new Board({
    open: (taskId) => {
      history.replaceState(null, '', `#task/${encodeURIComponent(taskId)}`);
      void detail.open(taskId);
    },
    changed: (task) => {
      // A question asked or answered changes the task's summary: the open views follow it.
      if (view === 'questions') void questions.refresh('keep');
      if (task.taskId === detail.openTaskId) {
        clearTimeout(detailReload);
        detailReload = setTimeout(() => void detail.open(task.taskId), DETAIL_RELOAD_MS);
      }
    },
  });

  const show = (next: View) => {
    view = next;
    for (const panel of document.querySelectorAll<HTMLElement>('[data-view-panel]')) panel.hidden = panel.dataset.viewPanel !== next;
    for (const button of document.querySelectorAll<HTMLElement>('#nav [data-view]')) {
      if (button.dataset.view === next) button.setAttribute('aria-current', 'page');
      else button.removeAttribute('aria-current');
    }
    if (next === 'questions') void questions.refresh('drop');
    if (next === 'operations') void operations.refresh('drop');
  };
  byId('nav').addEventListener('click', (event) => {
    const target = (event.target as HTMLElement).closest<HTMLElement>('[data-view]');
    if (!target) return;
    show(target.dataset.view as View);
    history.replaceState(null, '', target.dataset.view === 'board' ? '#' : `#${target.dataset.view}`);
  });
  setInterval(() => {
    if (view === 'operations' && session) void operations.refresh('keep');
  }, OPERATIONS_REFRESH_MS);

  const begin = (next: ConsoleSession) => {
    session = next;
    board.start(next);
    detail.use(next);
    questions.use(next);
    operations.use(next);
    if (view === 'operations') void operations.refresh('drop');
  };
  // A link may name a view (`#questions`, `#operations`) or a task (`#task/<id>`).
  const link = /^#(questions|operations|task\/(.+))$/.exec(location.hash);
  if (link?.[2]) void detail.open(decodeURIComponent(link[2]));
  else if (link) show(link[1] as View);
  const connection = new ConsoleConnection(config, { connected: begin, reconnected: begin });
  await connection.restart();
}

start().catch((err: unknown) => {
  showConnectionState('disconnected', `The console could not start: ${(err as Error).message}`);
});
