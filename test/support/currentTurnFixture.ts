import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { durableTurnSchema } from './turnPayload.js';
import type { DurableTurn } from '../../src/turns/index.js';

/**
 * The shared current-turn fixture (spec AC-10): one file, read by every implementation of the
 * rule and by both dialects, so agreement is proven by a single artifact.
 *
 * The path is resolved from this module, never from the working directory, and every failure to
 * read, parse or validate the file throws: a fixture that silently stops being read would look
 * exactly like implementations that agree.
 */
const CURRENT_TURN_FIXTURE_URL = new URL('../../testdata/current_turn_resolution.json', import.meta.url);

// Fixture instants are stricter than payload instants: at most microseconds, so SQLite and
// PostgreSQL hold the very same instants (finer differences belong to TS-only unit tests).
const FIXTURE_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$/;
const fixtureInstant = z.string().regex(FIXTURE_INSTANT, 'expected RFC 3339 UTC with at most 6 fractional digits');

/** A fixture turn as written in the file: every key present, `completed_at: null` when open. */
const fixtureTurnSchema = z
  .object({
    id: z.string().min(1),
    started_at: fixtureInstant,
    created_at: fixtureInstant,
    completed_at: fixtureInstant.nullable(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
  })
  .strict()
  .superRefine((turn, ctx) => {
    // D15: every fixture turn must be authority-eligible by construction.
    for (const key of Object.keys(turn.metadata ?? {})) {
      if (key.startsWith('prompt_dispatch_'))
        ctx.addIssue({ code: 'custom', path: ['metadata', key], message: 'fixture turns may not set prompt_dispatch_* keys' });
    }
  });

const fixtureCaseSchema = z
  .object({
    name: z.string().min(1),
    turns: z.array(fixtureTurnSchema),
    expected_current_turn_id: z.string().min(1).nullable(),
  })
  .strict()
  .superRefine((fixtureCase, ctx) => {
    const ids = fixtureCase.turns.map((t) => t.id);
    if (new Set(ids).size !== ids.length) ctx.addIssue({ code: 'custom', path: ['turns'], message: 'turn ids must be unique within a case' });
    const expected = fixtureCase.expected_current_turn_id;
    if (expected !== null && !ids.includes(expected)) {
      ctx.addIssue({ code: 'custom', path: ['expected_current_turn_id'], message: `no turn with id ${expected}` });
    }
  });

const fixtureFileSchema = z
  .object({ cases: z.array(fixtureCaseSchema).min(1) })
  .strict()
  .superRefine((file, ctx) => {
    const names = file.cases.map((c) => c.name);
    if (new Set(names).size !== names.length) ctx.addIssue({ code: 'custom', path: ['cases'], message: 'case names must be unique' });
    if (!file.cases.some((c) => c.expected_current_turn_id === null)) {
      ctx.addIssue({ code: 'custom', path: ['cases'], message: 'at least one case must resolve no current turn (D8)' });
    }
  });

type FixtureTurn = z.infer<typeof fixtureTurnSchema>;

export interface CurrentTurnFixtureCase {
  name: string;
  /** The turns exactly as the file gives them, for seeding a database. */
  rows: FixtureTurn[];
  /** The same turns as a UI client receives them: `completed_at: null` becomes an absent property. */
  turns: DurableTurn[];
  /** null: no current turn resolves. */
  expectedCurrentTurnId: string | null;
}

export class CurrentTurnFixtureError extends Error {
  override name = 'CurrentTurnFixtureError';
  readonly code = 'TEST_FIXTURE_INVALID';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

function toPayloadTurn(row: FixtureTurn, where: string): DurableTurn {
  const { completed_at, ...rest } = row;
  const payload = completed_at === null ? rest : { ...rest, completed_at };
  // Validated by the production payload schema, so the fixture cannot hold a turn a client would reject.
  const parsed = durableTurnSchema.safeParse(payload);
  if (!parsed.success) throw new CurrentTurnFixtureError(`${where}: not a valid turn payload: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Parses and validates fixture text; throws CurrentTurnFixtureError on any defect. */
export function parseCurrentTurnFixture(text: string, source: string): CurrentTurnFixtureCase[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new CurrentTurnFixtureError(`${source}: not valid JSON`, { cause });
  }
  const parsed = fixtureFileSchema.safeParse(json);
  if (!parsed.success) throw new CurrentTurnFixtureError(`${source}: invalid fixture:\n${z.prettifyError(parsed.error)}`);
  return parsed.data.cases.map((c, index) => ({
    name: c.name,
    rows: c.turns,
    turns: c.turns.map((row, turnIndex) => toPayloadTurn(row, `${source}: cases[${index}].turns[${turnIndex}]`)),
    expectedCurrentTurnId: c.expected_current_turn_id,
  }));
}

/** Reads and validates the fixture at `url` (the shared file unless told otherwise). Never skips: throws. */
export function loadCurrentTurnFixture(url: URL = CURRENT_TURN_FIXTURE_URL): CurrentTurnFixtureCase[] {
  const path = fileURLToPath(url);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new CurrentTurnFixtureError(`cannot read the current-turn fixture at ${path}`, { cause });
  }
  return parseCurrentTurnFixture(text, path);
}
