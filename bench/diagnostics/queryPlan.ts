/**
 * --diagnose for the query benchmark: the plan each engine chose for the windowed pending-action
 * statement, and the indexes it names.
 */
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { pendingActionsStatement } from '../../src/repository/projection/pendingActions.js';

/** SQLite: EXPLAIN QUERY PLAN as an indented tree; PostgreSQL: EXPLAIN (ANALYZE, BUFFERS), which runs the statement. */
export async function explainPendingActions(ctx: RepositoryContext, sessionIds: readonly string[]): Promise<string[]> {
  const { sql, bindings } = pendingActionsStatement(ctx.dialect, sessionIds);
  if (ctx.dialect.name === 'postgres') {
    const rows = await rawRows<{ 'QUERY PLAN': string }>(ctx, `EXPLAIN (ANALYZE, BUFFERS) ${sql}`, bindings);
    return rows.map((r) => r['QUERY PLAN']);
  }
  const rows = await rawRows<{ id: number; parent: number; detail: string }>(ctx, `EXPLAIN QUERY PLAN ${sql}`, bindings);
  const depth = new Map<number, number>([[0, -1]]);
  return rows.map((r) => {
    const d = (depth.get(r.parent) ?? -1) + 1;
    depth.set(r.id, d);
    return `${'  '.repeat(d)}${r.detail}`;
  });
}

export function formatPlan(dialect: string, sessions: number, plan: readonly string[]): string[] {
  const found = new Set<string>();
  for (const line of plan) for (const m of line.matchAll(/\b(idx_\w+|pp_(?!json_|safe_)\w+|\w+_pkey|sqlite_autoindex_\w+)\b/g)) found.add(m[1]!);
  return [
    '',
    `  diagnostics (--diagnose): ${dialect === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN (ANALYZE, BUFFERS)'} of the windowed statement for ${sessions} sessions:`,
    // PostgreSQL inlines the bound id array into the plan text; a line of 1,000 UUIDs says nothing.
    ...plan.map((line) => `    ${line.length > 200 ? `${line.slice(0, 197)}...` : line}`),
    `  indexes used: ${[...found].sort().join(', ') || '(none)'}`,
  ];
}
