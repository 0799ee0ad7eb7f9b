import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { silentLogger } from '../../src/logger.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';
import { newestDurableTurnId } from '../../src/turns/newestDurableTurnId.js';
import { describeEachDialect, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { kandevTexts, openSchemaDatabase, rowWriter, type RowWriter, type SchemaKind } from '../support/rowWriters.js';
import { seedTurnAt, type SeedTurn } from '../support/seed.js';
import { collectSummaries } from '../support/summaries.js';
import type { TextPlan } from '../support/timestampTexts.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/**
 * The spec's scenarios 1-5 (spec "Scenarios"; test/integration/currentTurnScenarios.test.ts has the
 * SQL side), plus sub-second ties and a column mixing both timestamp texts, end to end: rows are
 * written, one event is published, and the outcome is read where users meet it: the summary the
 * worker publishes, and the endpoints (session.turns, task.pending_actions, session.guard,
 * clarification.list_pending, clarification.respond). Each runs on the owned schema (this
 * service's rows), and beside Kandev's schema on Kandev's rows: in its text form, and in a per-value
 * mix with the canonical form. Turn ids are fixed, so every dialect must name the very same
 * current turn (scenario 6, D9).
 */

interface ScenarioTurn extends SeedTurn {
  id: string;
  /**
   * Beside Kandev's schema, this row's text regardless of the plan: two rows of one column in the two
   * texts, where text order and time order disagree. The owned schema writes canonical text only.
   */
  text?: 'kandev' | 'canonical';
}

interface Scenario {
  name: string;
  turns: ScenarioTurn[];
  /** Pending bundles, each on a turn. */
  bundles: Array<{ pendingId: string; turnId: string; createdAt: string }>;
  current: string | null;
  /** The pending ids listed, and the session's pending action. */
  listed: string[];
  /** A bundle the respond endpoint must accept (the others it must refuse as conflict). */
  answerable?: string;
}

const LIFECYCLE = { lifecycle_only: true };
/** A turn born completed: started_at = completed_at = created_at (a lifecycle turn, or a legacy zero-duration one). */
const instantTurn = (id: string, at: string, metadata: Record<string, unknown> = {}): ScenarioTurn => ({
  id,
  startedAt: at,
  createdAt: at,
  completedAt: at,
  metadata,
});

const SCENARIOS: Scenario[] = [
  {
    name: 'scenario 1: resume during an open turn, the question asked afterwards, stays listed, badged and answerable',
    turns: [{ id: 's1-real', startedAt: '2026-08-20T01:40:08.937Z' }, instantTurn('s1-lifecycle', '2026-08-20T01:40:09.737Z', LIFECYCLE)],
    bundles: [{ pendingId: 's1-bundle', turnId: 's1-real', createdAt: '2026-08-20T02:44:00.25Z' }],
    current: 's1-real',
    listed: ['s1-bundle'],
    answerable: 's1-bundle',
  },
  {
    name: 'scenario 2: resume between turns, the new real turn 3 s after the lifecycle turn is current',
    turns: [
      { id: 's2-previous', startedAt: '2026-08-20T10:00:00.5Z', completedAt: '2026-08-20T10:05:00.125Z' },
      instantTurn('s2-lifecycle', '2026-08-20T10:05:01.0005Z', LIFECYCLE),
      { id: 's2-next', startedAt: '2026-08-20T10:05:04.0005Z' },
    ],
    bundles: [
      { pendingId: 's2-superseded', turnId: 's2-previous', createdAt: '2026-08-20T10:04:00Z' },
      { pendingId: 's2-bundle', turnId: 's2-next', createdAt: '2026-08-20T10:06:00.000001Z' },
    ],
    current: 's2-next',
    listed: ['s2-bundle'],
    answerable: 's2-bundle',
  },
  {
    name: 'scenario 3: a legacy unmarked zero-duration turn later than an open turn does not shadow it',
    turns: [{ id: 's3-open', startedAt: '2026-08-20T11:00:00.25Z' }, instantTurn('s3-legacy', '2026-08-20T11:00:01Z')],
    bundles: [{ pendingId: 's3-bundle', turnId: 's3-open', createdAt: '2026-08-20T11:00:00.75Z' }],
    current: 's3-open',
    listed: ['s3-bundle'],
    answerable: 's3-bundle',
  },
  {
    name: 'scenario 4: the same legacy turn over a completed turn stays current, and the older bundle superseded (known residual)',
    turns: [{ id: 's4-real', startedAt: '2026-08-20T11:00:00.25Z', completedAt: '2026-08-20T11:00:00.9Z' }, instantTurn('s4-legacy', '2026-08-20T11:00:01Z')],
    bundles: [{ pendingId: 's4-superseded', turnId: 's4-real', createdAt: '2026-08-20T11:00:00.75Z' }],
    current: 's4-legacy',
    listed: [],
  },
  {
    name: 'scenario 5: a session with only lifecycle turns has no current turn, lists nothing and fails nothing',
    turns: [instantTurn('s5-boot-1', '2026-08-20T12:00:00.1Z', LIFECYCLE), instantTurn('s5-boot-2', '2026-08-20T12:00:00.2Z', LIFECYCLE)],
    bundles: [],
    current: null,
    listed: [],
  },
  {
    name: 'a tie on started_at to the microsecond falls to created_at',
    turns: [
      { id: 'tie1-later', startedAt: '2026-08-20T13:00:00.5Z', createdAt: '2026-08-20T13:00:00.700001Z', completedAt: '2026-08-20T13:00:01Z' },
      { id: 'tie1-earlier', startedAt: '2026-08-20T13:00:00.5Z', createdAt: '2026-08-20T13:00:00.7Z', completedAt: '2026-08-20T13:00:01Z' },
    ],
    bundles: [
      { pendingId: 'tie1-bundle', turnId: 'tie1-later', createdAt: '2026-08-20T13:00:00.8Z' },
      { pendingId: 'tie1-superseded', turnId: 'tie1-earlier', createdAt: '2026-08-20T13:00:00.8Z' },
    ],
    current: 'tie1-later',
    listed: ['tie1-bundle'],
    answerable: 'tie1-bundle',
  },
  {
    // Byte order: 'B' (0x42) sorts before 'a' (0x61), so id DESC picks 'a' under any collation.
    name: 'a tie on started_at and created_at falls to the id, compared byte-wise',
    turns: [
      { id: 'tie2-a', startedAt: '2026-08-20T13:30:00.000001Z', completedAt: '2026-08-20T13:30:01Z' },
      { id: 'tie2-B', startedAt: '2026-08-20T13:30:00.000001Z', completedAt: '2026-08-20T13:30:01Z' },
    ],
    bundles: [
      { pendingId: 'tie2-bundle', turnId: 'tie2-a', createdAt: '2026-08-20T13:30:00.5Z' },
      { pendingId: 'tie2-superseded', turnId: 'tie2-B', createdAt: '2026-08-20T13:30:00.5Z' },
    ],
    current: 'tie2-a',
    listed: ['tie2-bundle'],
    answerable: 'tie2-bundle',
  },
  {
    // As text the canonical row ('…T13:45…') sorts above Kandev's ('… 13:45…'): they are one instant.
    name: 'the same instant in the two texts of one column is a tie, which falls to the id',
    turns: [
      { id: 'mixed1-k', startedAt: '2026-08-20T13:45:00.5Z', completedAt: '2026-08-20T13:45:01Z', text: 'kandev' },
      { id: 'mixed1-c', startedAt: '2026-08-20T13:45:00.5Z', completedAt: '2026-08-20T13:45:01Z', text: 'canonical' },
    ],
    bundles: [
      { pendingId: 'mixed1-bundle', turnId: 'mixed1-k', createdAt: '2026-08-20T13:45:00.6Z' },
      { pendingId: 'mixed1-superseded', turnId: 'mixed1-c', createdAt: '2026-08-20T13:45:00.6Z' },
    ],
    current: 'mixed1-k',
    listed: ['mixed1-bundle'],
    answerable: 'mixed1-bundle',
  },
  {
    // Both completed, so started_at decides: as text the canonical turn sorts above the later one.
    name: 'a Kandev-form turn 50 ms after a canonical one in the same column is current, though it sorts below it as text',
    turns: [
      { id: 'mixed2-canonical', startedAt: '2026-08-20T14:00:00.5Z', completedAt: '2026-08-20T14:00:00.52Z', text: 'canonical' },
      { id: 'mixed2-kandev', startedAt: '2026-08-20T14:00:00.55Z', completedAt: '2026-08-20T14:00:00.58Z', text: 'kandev' },
    ],
    bundles: [
      { pendingId: 'mixed2-superseded', turnId: 'mixed2-canonical', createdAt: '2026-08-20T14:00:00.51Z' },
      { pendingId: 'mixed2-bundle', turnId: 'mixed2-kandev', createdAt: '2026-08-20T14:00:00.6Z' },
    ],
    current: 'mixed2-kandev',
    listed: ['mixed2-bundle'],
    answerable: 'mixed2-bundle',
  },
];

interface Plan {
  schema: SchemaKind;
  /** Beside Kandev's schema: the text Kandev's rows are written in. */
  texts: TextPlan;
  title: string;
}

const PLANS: Plan[] = [
  { schema: 'owned', texts: 'kandev', title: "on %s, this service's schema and rows" },
  { schema: 'kandev', texts: 'kandev', title: "on %s, beside Kandev's schema, Kandev's rows in its timestamp text" },
  { schema: 'kandev', texts: 'mixed', title: "on %s, beside Kandev's schema, each timestamp in either text" },
];

for (const plan of PLANS) {
  describeEachDialect(`current-turn scenarios through the worker and its endpoints ${plan.title}`, (dialect) => {
    let t: TestDatabase;
    let nc: NatsConnection;
    let worker: WorkerHandle;
    let prefix: string;
    let client: PendingProjectorClient;
    let summaries: ReturnType<typeof collectSummaries>;
    let w: RowWriter;
    let jsm: JetStreamManager;

    beforeAll(async () => {
      t = await openSchemaDatabase(dialect, plan.schema);
      nc = await connectTestNats();
      prefix = uniquePrefix(`scen_${dialect}`);
      summaries = collectSummaries(nc, prefix);
      worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
      client = createPendingProjectorClient(nc, { prefix });
      w = rowWriter(plan.schema, t.ctx, plan.texts, 15);
      jsm = await jetstreamManager(nc);
    });
    afterAll(async () => {
      await worker?.stop();
      summaries?.stop();
      await deleteTopology(nc, prefix);
      await nc?.drain();
      await t?.close();
    });

    /** A turn in the writer's text, or, beside Kandev's schema, in the text the scenario forces. */
    function writeTurn(sessionId: string, turn: ScenarioTurn): Promise<string> {
      if (plan.schema === 'owned' || turn.text === undefined) return w.turnAt(sessionId, turn);
      return seedTurnAt(t.ctx, sessionId, turn, turn.text === 'kandev' ? kandevTexts(dialect, 'kandev') : (canonical) => canonical);
    }

    it.each(SCENARIOS.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
      const { taskId, sessionId, workspaceId } = await w.session();
      for (const turn of scenario.turns) await writeTurn(sessionId, turn);
      for (const bundle of scenario.bundles) await w.bundle({ sessionId, turnId: bundle.turnId, pendingId: bundle.pendingId, createdAt: bundle.createdAt });
      nc.publish(`${prefix}message.added`, envelope('message.added', { task_id: taskId, session_id: sessionId, type: 'clarification_request' }));

      const pending = scenario.listed.length > 0 ? 'clarification' : undefined;
      const published = await eventually(() => summaries.latest(taskId), 10_000, 'the first summary');
      expect(published.status_summary.pending_action).toBe(pending);

      const turns = await client.turns({ session_id: sessionId });
      if (!turns.ok) throw new Error(turns.error.message);
      expect(turns.current_turn_id).toBe(scenario.current);
      // The UI resolver agrees with the server on the history it is given (spec AC-9, D15).
      expect(newestDurableTurnId(turns.turns)).toBe(scenario.current);
      // Every instant reads back canonical, whichever text it was stored in.
      const instants = (turn: { started_at: string; created_at: string; completed_at?: string | null }) => [
        turn.started_at,
        turn.created_at,
        turn.completed_at ?? null,
      ];
      expect(new Map(turns.turns.map((turn) => [turn.id, instants(turn)]))).toEqual(
        new Map(
          scenario.turns.map((turn) => [
            turn.id,
            [turn.startedAt, turn.createdAt ?? turn.startedAt, turn.completedAt ?? null].map((at) => at && toCanonicalTimestamp(at)),
          ]),
        ),
      );

      expect(await client.pendingActions({ task_id: taskId })).toMatchObject({
        ok: true,
        pending_action: pending ?? null,
        sessions: [{ session_id: sessionId, pending_action: pending ?? null }],
      });
      expect(await client.guard({ session_id: sessionId })).toMatchObject({ ok: true, blocked: pending !== undefined, pending_ids: scenario.listed });
      const listed = await client.listPending({ workspace_id: workspaceId, limit: 10 });
      expect(listed.ok && listed.bundles.map((b) => [b.pending_id, b.turn_id, b.created_at])).toEqual(
        scenario.listed.map((id) => [id, scenario.current, toCanonicalTimestamp(scenario.bundles.find((b) => b.pendingId === id)!.createdAt)]),
      );

      for (const bundle of scenario.bundles.filter((b) => b.pendingId !== scenario.answerable)) {
        expect(await client.respond({ pending_id: bundle.pendingId, reject: { reason: 'superseded' } })).toMatchObject({
          ok: false,
          error: { code: 'conflict' },
        });
      }
      if (scenario.answerable !== undefined) {
        // No live waiter: the answer becomes a resume command, and the summary clears.
        const answer = await client.respond({ pending_id: scenario.answerable, answers: [{ question_id: 'q1', selected_options: ['a'], custom_text: '' }] });
        expect(answer).toMatchObject({ ok: true, claimed: true, delivery: 'resume', status: 'answered' });
        const resume = await jsm.streams.getMessage(worker.topology.agentResumeStream, { last_by_subj: worker.topology.agentResumeSubject(sessionId) });
        expect(resume!.json<{ data: Record<string, unknown> }>().data).toMatchObject({
          pending_id: scenario.answerable,
          clarification_turn_id: scenario.current,
        });
        await eventually(
          () => (summaries.latest(taskId)!.status_summary.revision > published.status_summary.revision ? true : undefined),
          10_000,
          'the summary to clear',
        );
        expect(summaries.latest(taskId)!.status_summary.pending_action).toBeUndefined();
      }
    });
  });
}
