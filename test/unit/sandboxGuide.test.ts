import { describe, expect, it } from 'vitest';
import { answerRequest, exampleRequests, requestCommands, sandboxGuide, shellWord } from '../../src/bin/sandboxGuide.js';
import { withSearchPath } from '../../src/bin/sandboxDatabase.js';
import type { SandboxWorkspace } from '../../src/repository/sandbox/seedSandboxWorkspace.js';
import { ENDPOINTS } from '../../src/contract/endpoints.js';
import { shellWords } from '../support/sandboxProcess.js';

const workspace: SandboxWorkspace = {
  workspaceId: 'ws',
  question: { taskId: 't1', sessionId: 's1', pendingId: 'p1', questionId: 'q1', optionIds: ['a', 'b'] },
  permission: { taskId: 't2', sessionId: 's2', pendingId: 'p2' },
  plan: { taskId: 't3', sessionId: 's3', planId: 'plan', comments: [{ id: 'c1', version: 1 }] },
  queue: { taskId: 't4', sessionId: 's4', queuedIds: ['q-1'], revision: 1 },
  paused: { taskId: 't6', sessionId: 's6', queuedId: 'q-6' },
  completed: { taskId: 't5', sessionId: 's5' },
};

describe('the sandbox guide', () => {
  it('prints one request for every endpoint the worker serves', () => {
    const endpoints = [answerRequest(workspace), ...exampleRequests(workspace, 1)].map((r) => r.endpoint);
    expect([...endpoints].sort()).toEqual(Object.values(ENDPOINTS).sort());
  });

  it("quotes each body so a shell gives the command exactly the request's JSON, quotes inside included", () => {
    const request = { endpoint: 'message.send', body: { session_id: 's', caller_id: 'c', content: "it's 'quoted' $HOME `x`" }, what: '' };
    const { npx, nats } = requestCommands('sb_1.', request);
    expect(shellWords(npx)).toEqual([
      'npx',
      'pending-projector',
      'sandbox',
      'request',
      'message.send',
      JSON.stringify(request.body),
      '--subject-prefix',
      'sb_1.',
    ]);
    expect(shellWords(nats)).toEqual(['nats', 'req', 'sb_1.pending_projector.v1.message.send', JSON.stringify(request.body)]);
    expect(shellWord('plain-word.1')).toBe('plain-word.1');
  });

  it('offers the database to other commands only when another process can reach it', () => {
    const base = { prefix: 'sb.', workspace, databaseWhere: 'w', natsUrl: 'nats://x', healthPort: 1, deadLetterSeq: 1 };
    expect(sandboxGuide({ ...base, databaseUrl: 'sqlite:/tmp/x.db', shareable: true })).toContain('DATABASE_URL=sqlite:/tmp/x.db npx pending-projector verify');
    // summary.verify, over the bus, is offered either way; the verify command needs the database.
    expect(sandboxGuide({ ...base, databaseUrl: 'sqlite::memory:', shareable: false })).not.toContain('pending-projector verify');
  });
});

describe('withSearchPath', () => {
  it('adds the schema to the libpq options, keeping the other parameters and options', () => {
    expect(withSearchPath('postgres://u@h:5432/db', 'pp_sandbox_1')).toBe('postgres://u@h:5432/db?options=-c%20search_path%3Dpp_sandbox_1');
    const url = new URL(withSearchPath('postgres://u@h/db?sslmode=require&options=-c%20statement_timeout%3D5s', 's'));
    expect(url.searchParams.get('sslmode')).toBe('require');
    expect(url.searchParams.get('options')).toBe('-c statement_timeout=5s -c search_path=s');
  });
});
