import { describe, expect, it } from 'vitest';
import { CLARIFICATION_PRIMARY_ANSWERED, type KandevEvent } from '../../src/contract/kandevEvents.js';
import { silentLogger } from '../../src/logger.js';
import { publishOrRefresh, refreshThenPublish } from '../../src/services/publishOrRefresh.js';

const EVENTS: KandevEvent[] = [
  {
    type: CLARIFICATION_PRIMARY_ANSWERED,
    data: {
      pending_id: 'p1',
      session_id: 's1',
      task_id: 'task-1',
      clarification_turn_id: 't1',
      question: 'Proceed?',
      answer_text: 'Yes',
      rejected: false,
      reject_reason: '',
      status: 'answered',
    },
  },
];

/** Event and refresh ports that record each call in order, and refuse when told to. */
function ports(options: { busRefuses?: boolean; refreshFails?: boolean } = {}) {
  const calls: string[] = [];
  return {
    calls,
    events: {
      async publish(events: readonly KandevEvent[]) {
        calls.push(`publish ${events.length}`);
        if (options.busRefuses) throw new Error('no stream captures the subject');
      },
    },
    async refreshSummary(taskId: string) {
      calls.push(`refresh ${taskId}`);
      if (options.refreshFails) throw new Error(`task ${taskId}: summary compare-and-set lost 3 times`);
    },
  };
}

describe('publishOrRefresh', () => {
  it('publishes the events and leaves the summary to the projector when the bus takes them', async () => {
    const p = ports();
    await publishOrRefresh(p, silentLogger(), 'task-1', EVENTS);
    expect(p.calls).toEqual(['publish 1']);
  });

  it('refreshes the summary directly when the bus refuses the events', async () => {
    const p = ports({ busRefuses: true });
    await publishOrRefresh(p, silentLogger(), 'task-1', EVENTS);
    expect(p.calls).toEqual(['publish 1', 'refresh task-1']);
  });

  it('resolves when the refresh fails too: the write is committed either way', async () => {
    const p = ports({ busRefuses: true, refreshFails: true });
    await expect(publishOrRefresh(p, silentLogger(), 'task-1', EVENTS)).resolves.toBeUndefined();
    expect(p.calls).toEqual(['publish 1', 'refresh task-1']);
  });

  it('does nothing for a write that changed no row', async () => {
    const p = ports({ busRefuses: true });
    await publishOrRefresh(p, silentLogger(), 'task-1', []);
    expect(p.calls).toEqual([]);
  });
});

describe('refreshThenPublish', () => {
  it('refreshes the summary before it publishes the events', async () => {
    const p = ports();
    expect(await refreshThenPublish(p, silentLogger(), 'task-1', EVENTS)).toEqual({ refreshed: true });
    expect(p.calls).toEqual(['refresh task-1', 'publish 1']);
  });

  it('still publishes when the refresh did not commit, and says it did not with its error', async () => {
    const p = ports({ refreshFails: true });
    const outcome = await refreshThenPublish(p, silentLogger(), 'task-1', EVENTS);
    expect(outcome).toMatchObject({ refreshed: false, error: { message: 'task task-1: summary compare-and-set lost 3 times' } });
    expect(p.calls).toEqual(['refresh task-1', 'publish 1']);
  });

  it('reports a committed refresh even when the bus refuses the events afterwards', async () => {
    const p = ports({ busRefuses: true });
    expect(await refreshThenPublish(p, silentLogger(), 'task-1', EVENTS)).toEqual({ refreshed: true });
    expect(p.calls).toEqual(['refresh task-1', 'publish 1']);
  });
});
