/**
 * The latency-versus-load chart of (4): p50 and p99 of publish → summary at each level's offered
 * load, one pair of series per dialect, the 2 × trickle p99 threshold of each, and the points as a
 * table under the plot. Hand-written SVG, so the chart needs no dependency and diffs as text.
 */
import { TARGET_P99_OVER_TRICKLE, type LevelResult } from './latencyLevels.js';

export interface ChartSeries {
  /** "SQLite", "PostgreSQL". */
  title: string;
  levels: readonly LevelResult[];
  /** TARGET_P99_OVER_TRICKLE × the trickle's p99, ms. */
  thresholdMs: number;
}

const WIDTH = 900;
const PLOT = { left: 80, right: 640, top: 96, bottom: 436 };
const COLORS = ['#1f6fb4', '#d4580a', '#2a9d4a', '#8e44ad'];
const ROW_HEIGHT = 17;

const escape = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
const fixed = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** A round step (1, 2 or 5 × 10^k) that splits [0, max] into about `parts` intervals. */
function niceStep(max: number, parts: number): number {
  const raw = max / parts;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * magnitude >= raw)! * magnitude;
  return step;
}

function axis(max: number, parts: number): { max: number; ticks: number[] } {
  const step = niceStep(max > 0 ? max : 1, parts);
  const top = Math.ceil((max > 0 ? max : 1) / step) * step;
  const ticks: number[] = [];
  for (let t = 0; t <= top + step / 2; t += step) ticks.push(Number(t.toPrecision(12)));
  return { max: top, ticks };
}

function text(x: number, y: number, content: string, attrs = ''): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}"${attrs ? ` ${attrs}` : ''}>${escape(content)}</text>`;
}

/** The whole SVG document; `caption` lines go under the title (what was run, where, when). */
export function renderLatencyChart(series: readonly ChartSeries[], caption: readonly string[]): string {
  const points = series.flatMap((s) => s.levels);
  const xAxis = axis(Math.max(...points.map((p) => p.offeredRate)) * 1.05, 6);
  const yAxis = axis(Math.max(...points.map((p) => p.p99), ...series.map((s) => s.thresholdMs)) * 1.1, 6);
  const x = (rate: number) => PLOT.left + (rate / xAxis.max) * (PLOT.right - PLOT.left);
  const y = (ms: number) => PLOT.bottom - (Math.min(ms, yAxis.max) / yAxis.max) * (PLOT.bottom - PLOT.top);
  const tableTop = PLOT.bottom + 62;
  const height = tableTop + ROW_HEIGHT * (points.length + 1) + 16;
  const out: string[] = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    text(PLOT.left, 28, 'npm run bench (4): publish → summary latency against load', 'font-size="16" font-weight="bold"'),
    ...caption.map((line, i) => text(PLOT.left, 48 + i * 15, line, 'fill="#444444"')),
  ];

  // Grid and axes.
  for (const t of yAxis.ticks) {
    out.push(`<line x1="${PLOT.left}" y1="${y(t).toFixed(1)}" x2="${PLOT.right}" y2="${y(t).toFixed(1)}" stroke="#e4e4e4"/>`);
    out.push(text(PLOT.left - 8, y(t) + 4, String(t), 'text-anchor="end"'));
  }
  for (const t of xAxis.ticks) {
    out.push(`<line x1="${x(t).toFixed(1)}" y1="${PLOT.top}" x2="${x(t).toFixed(1)}" y2="${PLOT.bottom}" stroke="#f0f0f0"/>`);
    out.push(text(x(t), PLOT.bottom + 18, String(t), 'text-anchor="middle"'));
  }
  out.push(`<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="#888888"/>`);
  out.push(text((PLOT.left + PLOT.right) / 2, PLOT.bottom + 38, 'offered load (events/s)', 'text-anchor="middle"'));
  out.push(text(22, (PLOT.top + PLOT.bottom) / 2, 'publish → summary latency (ms)', `text-anchor="middle" transform="rotate(-90 22 ${(PLOT.top + PLOT.bottom) / 2})"`));

  // Thresholds, then the series over them.
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    out.push(`<line x1="${PLOT.left}" y1="${y(s.thresholdMs).toFixed(1)}" x2="${PLOT.right}" y2="${y(s.thresholdMs).toFixed(1)}" stroke="${color}" stroke-width="1.5" stroke-dasharray="2 4"/>`);
    out.push(text(PLOT.right - 4, y(s.thresholdMs) - 5, `${s.title}: ${TARGET_P99_OVER_TRICKLE} × trickle p99 = ${fixed(s.thresholdMs)} ms`, `text-anchor="end" fill="${color}" font-size="11"`));
  });
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const sorted = [...s.levels].sort((a, b) => a.offeredRate - b.offeredRate);
    const path = (pick: (l: LevelResult) => number) => sorted.map((l) => `${x(l.offeredRate).toFixed(1)},${y(pick(l)).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${path((l) => l.p50)}" fill="none" stroke="${color}" stroke-width="1.5" stroke-dasharray="6 4"/>`);
    out.push(`<polyline points="${path((l) => l.p99)}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const l of sorted) {
      out.push(`<circle cx="${x(l.offeredRate).toFixed(1)}" cy="${y(l.p50).toFixed(1)}" r="3.5" fill="#ffffff" stroke="${color}" stroke-width="1.5"/>`);
      out.push(`<circle cx="${x(l.offeredRate).toFixed(1)}" cy="${y(l.p99).toFixed(1)}" r="4" fill="${color}"/>`);
      out.push(text(x(l.offeredRate) + 6, y(l.p99) - 6, l.label, `fill="${color}" font-size="10"`));
    }
  });

  // Legend.
  const legendX = PLOT.right + 24;
  let legendY = PLOT.top + 6;
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    out.push(text(legendX, legendY, s.title, 'font-weight="bold"'));
    out.push(`<line x1="${legendX}" y1="${legendY + 12}" x2="${legendX + 28}" y2="${legendY + 12}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<circle cx="${legendX + 14}" cy="${legendY + 12}" r="4" fill="${color}"/>`);
    out.push(text(legendX + 36, legendY + 16, 'p99'));
    out.push(`<line x1="${legendX}" y1="${legendY + 28}" x2="${legendX + 28}" y2="${legendY + 28}" stroke="${color}" stroke-width="1.5" stroke-dasharray="6 4"/>`);
    out.push(`<circle cx="${legendX + 14}" cy="${legendY + 28}" r="3.5" fill="#ffffff" stroke="${color}" stroke-width="1.5"/>`);
    out.push(text(legendX + 36, legendY + 32, 'p50'));
    out.push(`<line x1="${legendX}" y1="${legendY + 44}" x2="${legendX + 28}" y2="${legendY + 44}" stroke="${color}" stroke-width="1.5" stroke-dasharray="2 4"/>`);
    out.push(text(legendX + 36, legendY + 48, `${TARGET_P99_OVER_TRICKLE} × trickle p99`));
    legendY += 70;
  });
  const notes = [
    'Target: p99 at 25% and at 50%',
    `of (1) ≤ ${TARGET_P99_OVER_TRICKLE} × the p99 at 5% of (1).`,
    '(1): bare projection limit,',
    '(2): worker throughput, both',
    'measured in the same run.',
    '75% of (1) and 50% of (2):',
    'context.',
  ];
  notes.forEach((line, i) => out.push(text(legendX, legendY + i * 15, line, 'fill="#444444" font-size="11"')));

  // The points as a table.
  const columns: Array<[string, number, 'start' | 'end']> = [
    ['', PLOT.left, 'start'],
    ['level', PLOT.left + 110, 'start'],
    ['offered/s', PLOT.left + 290, 'end'],
    ['achieved/s', PLOT.left + 390, 'end'],
    ['p50 ms', PLOT.left + 470, 'end'],
    ['p99 ms', PLOT.left + 550, 'end'],
    ['p99 ÷ trickle p99', PLOT.left + 680, 'end'],
  ];
  columns.forEach(([title, cx, anchor]) => out.push(text(cx, tableTop, title, `text-anchor="${anchor}" font-weight="bold"`)));
  let row = 1;
  for (const s of series) {
    const trickle = s.levels.find((l) => l.role === 'trickle');
    for (const l of s.levels) {
      const cells = [
        s.title,
        `${l.label}${l.role === 'context' ? ' (context)' : l.role === 'trickle' ? ' (trickle)' : ''}`,
        fixed(l.offeredRate, 0),
        fixed(l.achievedRate, 0),
        fixed(l.p50, 2),
        fixed(l.p99, 2),
        trickle ? `${fixed(l.p99 / trickle.p99, 2)}×` : '-',
      ];
      cells.forEach((cell, c) => out.push(text(columns[c]![1], tableTop + row * ROW_HEIGHT, cell, `text-anchor="${columns[c]![2]}"`)));
      row++;
    }
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
