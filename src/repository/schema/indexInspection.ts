import { relationNamed, type SchemaTarget } from './catalog.js';
import { requiredIndexes, type RequiredIndex } from './requiredIndexes.js';

/**
 * - `present`: an index of that name holds the definition the queries rely on;
 * - `missing`: nothing holds the name;
 * - `different`: something else holds the name (another definition, another table, not an index):
 *   an index of the right name is never taken for the right index;
 * - `invalid`: PostgreSQL only, the index a failed `CREATE INDEX CONCURRENTLY` leaves behind; the
 *   planner ignores it, and `migrate --add-indexes` drops and rebuilds it.
 */
type IndexState = 'present' | 'missing' | 'different' | 'invalid';

export interface IndexInspection {
  readonly index: RequiredIndex;
  readonly state: IndexState;
  /** What holds the name when it is not the required index: its definition, or its kind. */
  readonly found?: string;
  /** PostgreSQL: the schema of the relation holding the name. */
  readonly schema?: string;
}

// CREATE [UNIQUE] INDEX [CONCURRENTLY] [IF NOT EXISTS] <name> ON [ONLY] [<schema>.]<table> ...
const HEAD = /^\s*create\s+(unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:"[^"]*"|`[^`]*`|\[[^\]]*\]|[^\s(]+)\s+on\s+(?:only\s+)?/i;
const SCHEMA_QUALIFIER = /^(?:"[^"]*"|`[^`]*`|[A-Za-z_][\w$]*)\./;

/**
 * The part of an index's statement that says what it indexes, in a form two spellings of one index
 * share: the name, `IF NOT EXISTS`, `CONCURRENTLY` and a schema qualifier are dropped, and outside
 * string literals whitespace and identifier quotes are removed and letters lower-cased. String
 * literals (JSON paths) are kept as written. Whether it is UNIQUE is kept.
 */
export function normalizeIndexDefinition(sql: string): string {
  const head = HEAD.exec(sql);
  if (!head) return squash(sql);
  const target = sql.slice(head[0].length).replace(SCHEMA_QUALIFIER, '');
  return `${head[1] ? 'unique ' : ''}on ${squash(target)}`;
}

function squash(text: string): string {
  let out = '';
  let inLiteral = false;
  for (const ch of text) {
    if (ch === "'") {
      // A doubled quote inside a literal closes and reopens it, which leaves both quotes in place.
      inLiteral = !inLiteral;
      out += ch;
    } else if (inLiteral) out += ch;
    else if (!/\s/.test(ch) && ch !== '"' && ch !== '`') out += ch.toLowerCase();
  }
  return out;
}

/** Each required index of the target's dialect, in list order, with what the catalog holds under its name. */
export async function inspectRequiredIndexes(target: SchemaTarget): Promise<IndexInspection[]> {
  const inspections: IndexInspection[] = [];
  for (const index of requiredIndexes(target.dialect)) inspections.push(await inspectIndex(target, index));
  return inspections;
}

export async function inspectIndex(target: SchemaTarget, index: RequiredIndex): Promise<IndexInspection> {
  const relation = await relationNamed(target, index.name, index.table);
  if (!relation) return { index, state: 'missing' };
  const schema = relation.schema ?? undefined;
  if (relation.kind !== 'index' || relation.definition === null) return { index, state: 'different', found: `a ${relation.kind}`, schema };
  const same = normalizeIndexDefinition(relation.definition) === normalizeIndexDefinition(index.definition);
  if (!same) return { index, state: 'different', found: relation.definition, schema };
  return relation.valid ? { index, state: 'present', schema } : { index, state: 'invalid', found: relation.definition, schema };
}

/** The inspections whose index the queries do not have (anything but `present`). */
export function unservedIndexes(inspections: readonly IndexInspection[]): IndexInspection[] {
  return inspections.filter((inspection) => inspection.state !== 'present');
}
