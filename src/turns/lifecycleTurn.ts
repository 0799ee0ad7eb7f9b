/**
 * The exact marker test shared with the SQL rule (src/repository/dialect.ts): a turn is lifecycle
 * only when `metadata.lifecycle_only` is `true`, a number equal to 1, `"true"` or `"1"`. Truthiness
 * would misread "false", "0", "yes", {} and []; String() coercion would misread ["1"]. Either would
 * hide a question the server still serves (spec AC-9).
 */
export function isTruthyFlag(value: unknown): boolean {
  return value === true || value === 1 || value === 'true' || value === '1';
}

export interface TurnMetadataCarrier {
  metadata?: Record<string, unknown> | null;
}

export function isLifecycleTurn(turn: TurnMetadataCarrier): boolean {
  const metadata = turn.metadata;
  if (metadata === null || metadata === undefined || typeof metadata !== 'object' || Array.isArray(metadata)) return false;
  return isTruthyFlag(metadata.lifecycle_only);
}
