import { jetstreamManager } from '@nats-io/jetstream';
import { listDeadLetters, retryDeadLetter, showDeadLetter } from '../events/deadLetters.js';
import { topologyFor } from '../contract/subjects.js';
import { connectNats } from './connectNats.js';
import type { DeadLettersSettings } from './commandSettings.js';

/** The records `dead-letters list` shows without `--limit` (or with one that is not a positive number). */
export const DEFAULT_LIST_LIMIT = 100;

/** `dead-letters list | show <id> | retry <id>`. */
export async function runDeadLettersCommand(config: DeadLettersSettings, positionals: string[], limit: number): Promise<number> {
  const [action, rawId] = positionals;
  if (action !== 'list' && action !== 'show' && action !== 'retry') {
    process.stderr.write('usage: pending-projector dead-letters list [--limit N] | show <id> | retry <id>\n');
    return 2;
  }
  const id = Number(rawId);
  if (action !== 'list' && (!Number.isSafeInteger(id) || id < 1)) {
    const given = rawId === undefined ? 'none was given' : `${JSON.stringify(rawId)} is not one`;
    process.stderr.write(`dead-letters ${action} needs a record id, a positive whole number (the first column of 'dead-letters list'): ${given}\n`);
    return 2;
  }
  const nc = await connectNats(config, 'pending-projector-dead-letters');
  try {
    const topology = topologyFor(config.subjectPrefix);
    const jsm = await jetstreamManager(nc);
    if (action === 'list') {
      const entries = await listDeadLetters(jsm, topology, Number.isFinite(limit) && limit > 0 ? limit : DEFAULT_LIST_LIMIT).catch((err: Error) => {
        if (/not found/i.test(err.message)) return [];
        throw err;
      });
      if (entries.length === 0) process.stdout.write('no dead letters\n');
      for (const { id: dl, record } of entries) {
        process.stdout.write(
          `${dl}\t${record.dead_lettered_at}\t${record.reason}\tseq=${record.stream_seq}\t${record.subject || '-'}\t${record.detail.split('\n')[0]?.slice(0, 120)}\n`,
        );
      }
      return 0;
    }
    if (action === 'show') {
      const detail = await showDeadLetter(jsm, topology, id);
      if (!detail) {
        process.stderr.write(`no dead-letter record ${id}\n`);
        return 1;
      }
      process.stdout.write(`${JSON.stringify(detail, null, 2)}\n`);
      return 0;
    }
    const result = await retryDeadLetter(nc, topology, id);
    if (!result.ok) {
      process.stderr.write(
        result.reason === 'not_found'
          ? `no dead-letter record ${id}\n`
          : `record ${id}: the original event has left the stream (retention); nothing to retry\n`,
      );
      return 1;
    }
    process.stdout.write(`re-injected record ${id} as stream sequence ${result.newStreamSeq}\n`);
    return 0;
  } finally {
    await nc.drain().catch(() => undefined);
  }
}
