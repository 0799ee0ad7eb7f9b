import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import type { Config } from '../config.js';
import { parseEvent } from '../events/parseEvent.js';
import { taskIdOfSession } from '../repository/tasks/tasks.js';
import { withCommandParts } from './assembly.js';
import { createProgressReporter } from './progress.js';
import { plural } from './plural.js';
import type { ReplaySettings } from './commandSettings.js';

/**
 * `replay`: reads a window of the event stream through an ephemeral ordered consumer (the live
 * durable consumer is untouched), collects the tasks it touches, and reprojects each from the
 * database. Events only say which tasks to look at; the database says what is true.
 */
export async function runReplayCommand(config: ReplaySettings, window: { since?: string; fromSeq?: string }): Promise<number> {
  if ((window.since === undefined) === (window.fromSeq === undefined)) {
    process.stderr.write('replay needs exactly one of --since <RFC3339 time> or --from-seq <n>\n');
    return 2;
  }
  let start: { deliver_policy: DeliverPolicy; opt_start_time?: string; opt_start_seq?: number };
  if (window.since !== undefined) {
    const at = new Date(window.since);
    if (Number.isNaN(at.getTime())) {
      process.stderr.write(`--since ${JSON.stringify(window.since)} is not a time; use e.g. 2026-11-30T06:00:00Z\n`);
      return 2;
    }
    start = { deliver_policy: DeliverPolicy.StartTime, opt_start_time: at.toISOString() };
  } else {
    const seq = Number(window.fromSeq);
    if (!Number.isSafeInteger(seq) || seq < 1) {
      process.stderr.write(`--from-seq ${JSON.stringify(window.fromSeq)} is not a positive integer\n`);
      return 2;
    }
    start = { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: seq };
  }
  const progress = createProgressReporter();
  return withCommandParts(config, 'pending-projector-replay', async ({ ctx, projector, topology, jsm, nc }, logger) => {
    const stream = await jsm.streams.info(topology.eventsStream).catch(() => null);
    if (!stream) {
      process.stderr.write(`no event stream ${topology.eventsStream}: has a worker with prefix ${JSON.stringify(config.subjectPrefix)} ever run?\n`);
      return 1;
    }
    const endSeq = stream.state.last_seq;
    const tasks = new Set<string>();
    let read = 0;
    if (endSeq > 0 && (start.opt_start_seq === undefined || start.opt_start_seq <= endSeq)) {
      const reader = await jetstream(nc).consumers.get(topology.eventsStream, start);
      for (;;) {
        const m = await reader.next({ expires: 2000 });
        if (!m) break;
        read++;
        const parsed = parseEvent(m.data, Number.MAX_SAFE_INTEGER);
        if (parsed.ok) {
          const taskId = parsed.data.task_id ?? (parsed.data.session_id ? await taskIdOfSession(ctx, parsed.data.session_id) : undefined);
          if (taskId) tasks.add(taskId);
        }
        if (read % 1000 === 0) progress.update(`replay: read ${read} events (up to seq ${m.seq} of ${endSeq}), ${tasks.size} tasks`);
        if (m.seq >= endSeq) break;
      }
      await reader.delete().catch(() => undefined);
    }
    progress.update(`replay: read ${plural(read, 'event')}, ${plural(tasks.size, 'task')} to reproject`);
    let done = 0;
    let failed = 0;
    await Promise.all(
      [...tasks].map((taskId) =>
        projector.reproject(taskId).then(
          () => {
            done++;
            if (done % 100 === 0) progress.update(`replay: reprojected ${done}/${tasks.size} tasks`);
          },
          (err: Error) => {
            failed++;
            logger.error({ taskId, err }, 'reprojection failed');
          },
        ),
      ),
    );
    progress.done();
    process.stdout.write(`replayed ${plural(read, 'event')}: ${plural(tasks.size, 'task')} reprojected, ${failed} failed\n`);
    return failed > 0 ? 1 : 0;
  });
}
