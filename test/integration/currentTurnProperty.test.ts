import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { durableTurnSchema } from '../../src/events/turnPayload.js';
import { getActiveTurn, getCurrentTurn, listVisibleTurns } from '../../src/repository/turns.js';
import { newestDurableTurnId, type DurableTurn } from '../../src/turns/index.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedSession, seedTurnAt } from '../support/seed.js';

// A small set of instants, so random histories tie on started_at and created_at often. Pairs
// spelled differently name the same instant (".5" / ".500000", whole second / ".000000"); all stay
// within microseconds, which both dialects hold exactly.
const INSTANTS = [
  '2026-08-20T10:00:00Z',
  '2026-08-20T10:00:00.000000Z',
  '2026-08-20T10:00:00.000001Z',
  '2026-08-20T10:00:00.5Z',
  '2026-08-20T10:00:00.500000Z',
  '2026-08-20T10:00:01Z',
  '2099-01-01T00:00:00Z',
] as const;

// AC-9's marker values: four lifecycle encodings, then conversational ones.
const MARKER_VALUES: unknown[] = [true, 1, 'true', '1', null, false, 0, '', 'false', '0', 'yes', {}, [], ['1'], 'TRUE', 2];

// Raw metadata column texts another producer may have written; SQL reads a non-object or
// malformed document as "no keys" (D12), a UI client receives metadata absent (or null for NULL).
const RAW_METADATA: Array<string | null> = [
  '',
  'garbage',
  '[1]',
  '"x"',
  null,
  '{"lifecycle_only":true',
  '[{"lifecycle_only":true}]',
  '{"lifecycle_only":1.0}',
  '{"lifecycle_only":1e0}',
  '{ "lifecycle_only" : "1" }',
];

type MetadataDraw = { kind: 'object'; value: Record<string, unknown> } | { kind: 'raw'; text: string | null };

interface TurnDraw {
  suffix: string;
  startedAt: string;
  createdAt: string;
  completed: boolean;
  metadata: MetadataDraw;
}

const metadataArb: fc.Arbitrary<MetadataDraw> = fc.oneof(
  fc.constantFrom(...MARKER_VALUES).map((value): MetadataDraw => ({ kind: 'object', value: { lifecycle_only: value } })),
  fc.constantFrom<Record<string, unknown>>({}, { agent_profile: 'default' }).map((value): MetadataDraw => ({ kind: 'object', value })),
  fc.constantFrom(...RAW_METADATA).map((text): MetadataDraw => ({ kind: 'raw', text })),
);

const turnArb: fc.Arbitrary<TurnDraw> = fc.record({
  // Lower-case hex, the alphabet of Kandev's UUID ids, so id order is the same under any collation.
  suffix: fc.stringMatching(/^[0-9a-f]{2}$/),
  startedAt: fc.constantFrom(...INSTANTS),
  createdAt: fc.constantFrom(...INSTANTS),
  completed: fc.boolean(),
  metadata: metadataArb,
});

const historyArb = fc.uniqueArray(turnArb, { minLength: 1, maxLength: 8, selector: (turn) => turn.suffix });

/** The metadata a UI client receives for a drawn column value. */
function payloadMetadata(draw: MetadataDraw): Record<string, unknown> | null | undefined {
  if (draw.kind === 'object') return draw.value;
  if (draw.text === null) return null;
  try {
    const parsed: unknown = JSON.parse(draw.text);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // Malformed text: the client sees no metadata.
  }
  return undefined;
}

function toPayload(draw: TurnDraw): DurableTurn {
  const turn: DurableTurn = { id: draw.suffix, started_at: draw.startedAt, created_at: draw.createdAt };
  if (draw.completed) turn.completed_at = draw.startedAt;
  const metadata = payloadMetadata(draw.metadata);
  if (metadata !== undefined) turn.metadata = metadata;
  return turn;
}

interface Resolution {
  current: string | null;
  active: string | null;
  /** newestDurableTurnId over the turns listing as the server returns it (AC-11). */
  fromListing: string | null | undefined;
}

async function resolveOn(t: TestDatabase, history: readonly TurnDraw[]): Promise<Resolution> {
  const { sessionId } = await seedSession(t.ctx);
  // Ids are primary keys across sessions: one prefix per session, shared by its turns, so it never
  // changes their order.
  const prefix = `${sessionId}:`;
  for (const draw of history) {
    await seedTurnAt(t.ctx, sessionId, {
      id: prefix + draw.suffix,
      startedAt: draw.startedAt,
      createdAt: draw.createdAt,
      completedAt: draw.completed ? draw.startedAt : null,
      metadata: draw.metadata.kind === 'object' ? draw.metadata.value : draw.metadata.text,
    });
  }
  const unprefix = (id: string | undefined): string | null => (id === undefined ? null : id.slice(prefix.length));
  const listing = (await listVisibleTurns(t.ctx, sessionId)).map((record) =>
    durableTurnSchema.parse({
      id: unprefix(record.id),
      started_at: record.startedAt,
      created_at: record.createdAt,
      completed_at: record.completedAt,
      metadata: record.metadata,
    }),
  );
  return {
    current: unprefix((await getCurrentTurn(t.ctx, sessionId))?.id),
    active: unprefix((await getActiveTurn(t.ctx, sessionId))?.id),
    fromListing: newestDurableTurnId(listing),
  };
}

describeEachDialect('current-turn resolution over random histories on %s', (dialect) => {
  const databases: TestDatabase[] = [];
  beforeAll(async () => {
    databases.push(await openTestDatabase(dialect));
  });
  afterAll(async () => {
    await Promise.all(databases.map((t) => t.close()));
  });

  it('picks the same current and active turn in SQL and in newestDurableTurnId', async () => {
    await fc.assert(
      fc.asyncProperty(historyArb, async (history) => {
        const payload = history.map(toPayload);
        const expectedCurrent = newestDurableTurnId(payload);
        const expectedActive = newestDurableTurnId(payload.filter((turn) => turn.completed_at == null));
        for (const t of databases) {
          const resolved = await resolveOn(t, history);
          expect(resolved, `on ${t.name}`).toEqual({ current: expectedCurrent, active: expectedActive, fromListing: expectedCurrent });
        }
      }),
      { numRuns: 100 },
    );
  });
});
