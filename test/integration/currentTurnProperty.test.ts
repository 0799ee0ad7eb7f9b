import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { durableTurnSchema } from '../support/turnPayload.js';
import { getActiveTurn, getCurrentTurn, listVisibleTurns } from '../../src/repository/turns/turns.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { toKandevTimestamp, type TimestampForm } from '../../src/timestamps.js';
import { newestDurableTurnId, type DurableTurn } from '../../src/turns/index.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedSession, seedTurnAt, type TimestampText } from '../support/seed.js';
import { kandevContext } from '../support/timestampTexts.js';

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

const turnArbOver = (instants: readonly string[]): fc.Arbitrary<TurnDraw> =>
  fc.record({
    // Lower-case hex, the alphabet of Kandev's UUID ids, so id order is the same under any collation.
    suffix: fc.stringMatching(/^[0-9a-f]{2}$/),
    startedAt: fc.constantFrom(...instants),
    createdAt: fc.constantFrom(...instants),
    completed: fc.boolean(),
    metadata: metadataArb,
  });

const turnArb: fc.Arbitrary<TurnDraw> = turnArbOver(INSTANTS);

const historyArb = fc.uniqueArray(turnArb, { minLength: 1, maxLength: 8, selector: (turn) => turn.suffix });

// For the runs with Kandev's SQLite text: instants whose Kandev spellings trim differently
// (`…:00+00:00`, `…:00.5+00:00`, `…:00.45+00:00`, `…:00.05+00:00`), or differ only past the
// millisecond (`.0005`, `.000001`), so Kandev-form text and canonical text disagree in text order
// (' ' sorts before 'T', '+' before '.') while their instants tie or not.
const KANDEV_INSTANTS = [
  ...INSTANTS,
  '2026-08-20T10:00:00.45Z',
  '2026-08-20T10:00:00.05Z',
  '2026-08-20T10:00:00.0005Z',
  '2026-08-20T09:59:59.999999Z',
] as const;

/** A turn plus the stored text of each of its timestamps. */
interface TextedTurnDraw extends TurnDraw {
  startedForm: TimestampForm;
  createdForm: TimestampForm;
}

const formArb = fc.constantFrom<TimestampForm>('canonical', 'kandev');

const textedHistoryArb = (forms: fc.Arbitrary<TimestampForm>): fc.Arbitrary<TextedTurnDraw[]> =>
  fc.uniqueArray(
    fc
      .record({ turn: turnArbOver(KANDEV_INSTANTS), startedForm: forms, createdForm: forms })
      .map(({ turn, startedForm, createdForm }) => ({ ...turn, startedForm, createdForm })),
    { minLength: 1, maxLength: 8, selector: (turn) => turn.suffix },
  );

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
  return resolveIn(t.ctx, history);
}

/** The stored text of a draw's timestamp column: its own form when it has one, canonical otherwise. */
function textOf(draw: TurnDraw | TextedTurnDraw): TimestampText {
  return (canonical, column) => {
    const form = 'startedForm' in draw ? (column === 'created_at' ? draw.createdForm : draw.startedForm) : 'canonical';
    return form === 'kandev' ? toKandevTimestamp(canonical) : canonical;
  };
}

async function resolveIn(ctx: RepositoryContext, history: readonly (TurnDraw | TextedTurnDraw)[]): Promise<Resolution> {
  const { sessionId } = await seedSession(ctx);
  // Ids are primary keys across sessions: one prefix per session, shared by its turns, so it never
  // changes their order.
  const prefix = `${sessionId}:`;
  for (const draw of history) {
    await seedTurnAt(
      ctx,
      sessionId,
      {
        id: prefix + draw.suffix,
        startedAt: draw.startedAt,
        createdAt: draw.createdAt,
        completedAt: draw.completed ? draw.startedAt : null,
        metadata: draw.metadata.kind === 'object' ? draw.metadata.value : draw.metadata.text,
      },
      textOf(draw),
    );
  }
  const unprefix = (id: string | undefined): string | null => (id === undefined ? null : id.slice(prefix.length));
  const listing = (await listVisibleTurns(ctx, sessionId)).map((record) =>
    durableTurnSchema.parse({
      id: unprefix(record.id),
      started_at: record.startedAt,
      created_at: record.createdAt,
      completed_at: record.completedAt,
      metadata: record.metadata,
    }),
  );
  return {
    current: unprefix((await getCurrentTurn(ctx, sessionId))?.id),
    active: unprefix((await getActiveTurn(ctx, sessionId))?.id),
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

  // The same property over rows as Kandev's Go SQLite driver writes them, all of them or a per-value
  // mix with canonical rows in the same columns: the repository context reads them as detection
  // would on such a database. The listing's timestamps must come back canonical, or the payload
  // schema would refuse them.
  it.each([
    ["every timestamp in Kandev's SQLite form", fc.constant<TimestampForm>('kandev')],
    ['a per-value random mix of both forms', formArb],
  ] as const)('picks the same current and active turn in SQL and in newestDurableTurnId with %s', async (_title, forms) => {
    await fc.assert(
      fc.asyncProperty(textedHistoryArb(forms), async (history) => {
        const payload = history.map(toPayload);
        const expectedCurrent = newestDurableTurnId(payload);
        const expectedActive = newestDurableTurnId(payload.filter((turn) => turn.completed_at == null));
        for (const t of databases) {
          const resolved = await resolveIn(kandevContext(t.ctx), history);
          expect(resolved, `on ${t.name}`).toEqual({ current: expectedCurrent, active: expectedActive, fromListing: expectedCurrent });
        }
      }),
      { numRuns: 100 },
    );
  });
});
