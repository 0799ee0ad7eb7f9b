/**
 * The two shapes a benchmark's figures are printed in: an aligned text table per dialect (what was
 * measured, the figure, the target, the result), and one final Markdown table of every dialect side
 * by side, to paste into a README as it is.
 */

/** A figure: what was measured, its value, the target it is held to ('' for context), the result or a note. */
export type Row = readonly [metric: string, value: string, target: string, result: string];

export function textTable(rows: readonly Row[], indent = '  '): string[] {
  const header: Row = ['measured', 'value', 'target', 'result'];
  const all = [header, ...rows];
  const widths = [0, 1, 2].map((i) => Math.max(...all.map((row) => row[i]!.length)));
  return all.map((cells) =>
    `${indent}${cells.map((c, i) => (i === 3 ? c : i === 1 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ')}`.trimEnd(),
  );
}

/** One line per figure; `cells` holds one cell per column after the first, in `columns` order. */
export function markdownTable(columns: readonly string[], lines: ReadonlyArray<readonly string[]>): string[] {
  const escape = (cell: string) => cell.replaceAll('|', '\\|');
  return [`| ${columns.map(escape).join(' | ')} |`, `|${columns.map(() => '---').join('|')}|`, ...lines.map((line) => `| ${line.map(escape).join(' | ')} |`)];
}

export const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : String(n));
export const f1 = (n: number) => n.toFixed(1);
export const f2 = (n: number) => n.toFixed(2);
export const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
export const DIALECT_TITLE = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;
