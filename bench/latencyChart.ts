/**
 * The latency-versus-load chart of the worker bench: p50 and p99 of publish → summary at each
 * level's offered load, one pair of series per dialect, each dialect's threshold (a multiple of its
 * trickle's p99), and the points as a table under the plot. Hand-written SVG, so the chart needs no
 * dependency and diffs as text.
 */
import { TARGET_P99_OVER_TRICKLE, type LevelResult } from './latencyLevels.js';

export interface ChartSeries {
  title: string;
  levels: readonly LevelResult[];
  thresholdMs: number;
}

const WIDTH = 900;
const [LEFT, RIGHT, TOP, BOTTOM] = [80, 640, 96, 436];
const COLORS = ['#1f6fb4', '#d4580a', '#2a9d4a', '#8e44ad'];
const ROW_HEIGHT = 17;

const fixed = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const text = (x: number, y: number, content: string, attrs = '') =>
  `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}"${attrs ? ` ${attrs}` : ''}>${content.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')}</text>`;
const line = (x1: number, y1: number, x2: number, y2: number, attrs: string) =>
  `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${attrs}/>`;

/** Ticks at a round step (1, 2 or 5 × 10^k) splitting [0, max] into about six intervals. */
function axis(max: number): { max: number; ticks: number[] } {
  const raw = (max > 0 ? max : 1) / 6;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * magnitude >= raw)! * magnitude;
  const top = Math.ceil((max > 0 ? max : 1) / step) * step;
  const ticks: number[] = [];
  for (let t = 0; t <= top + step / 2; t += step) ticks.push(Number(t.toPrecision(12)));
  return { max: top, ticks };
}

/** The whole SVG document; `caption` lines go under the title (what was run, where, when). */
export function renderLatencyChart(series: readonly ChartSeries[], caption: readonly string[]): string {
  const points = series.flatMap((s) => s.levels);
  const xAxis = axis(Math.max(...points.map((p) => p.offeredRate)) * 1.05);
  const yAxis = axis(Math.max(...points.map((p) => p.p99), ...series.map((s) => s.thresholdMs)) * 1.1);
  const x = (rate: number) => LEFT + (rate / xAxis.max) * (RIGHT - LEFT);
  const y = (ms: number) => BOTTOM - (Math.min(ms, yAxis.max) / yAxis.max) * (BOTTOM - TOP);
  const tableTop = BOTTOM + 62;
  const height = tableTop + ROW_HEIGHT * (points.length + 1) + 16;
  const threshold = `${TARGET_P99_OVER_TRICKLE} × trickle p99`;
  const out: string[] = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    text(LEFT, 28, 'npm run bench: publish → summary latency against load', 'font-size="16" font-weight="bold"'),
    ...caption.map((c, i) => text(LEFT, 48 + i * 15, c, 'fill="#444444"')),
    ...yAxis.ticks.flatMap((t) => [line(LEFT, y(t), RIGHT, y(t), 'stroke="#e4e4e4"'), text(LEFT - 8, y(t) + 4, String(t), 'text-anchor="end"')]),
    ...xAxis.ticks.flatMap((t) => [line(x(t), TOP, x(t), BOTTOM, 'stroke="#f0f0f0"'), text(x(t), BOTTOM + 18, String(t), 'text-anchor="middle"')]),
    `<rect x="${LEFT}" y="${TOP}" width="${RIGHT - LEFT}" height="${BOTTOM - TOP}" fill="none" stroke="#888888"/>`,
    text((LEFT + RIGHT) / 2, BOTTOM + 38, 'offered load (events/s)', 'text-anchor="middle"'),
    text(22, (TOP + BOTTOM) / 2, 'publish → summary latency (ms)', `text-anchor="middle" transform="rotate(-90 22 ${(TOP + BOTTOM) / 2})"`),
  ];
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    out.push(line(LEFT, y(s.thresholdMs), RIGHT, y(s.thresholdMs), `stroke="${color}" stroke-width="1.5" stroke-dasharray="2 4"`));
    out.push(
      text(RIGHT - 4, y(s.thresholdMs) - 5, `${s.title}: ${threshold} = ${fixed(s.thresholdMs)} ms`, `text-anchor="end" fill="${color}" font-size="11"`),
    );
  });
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const sorted = [...s.levels].sort((a, b) => a.offeredRate - b.offeredRate);
    const path = (pick: (l: LevelResult) => number) => sorted.map((l) => `${x(l.offeredRate).toFixed(1)},${y(pick(l)).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${path((l) => l.p50)}" fill="none" stroke="${color}" stroke-width="1.5" stroke-dasharray="6 4"/>`);
    out.push(`<polyline points="${path((l) => l.p99)}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const l of sorted) {
      const cx = x(l.offeredRate).toFixed(1);
      out.push(`<circle cx="${cx}" cy="${y(l.p50).toFixed(1)}" r="3.5" fill="#ffffff" stroke="${color}" stroke-width="1.5"/>`);
      out.push(`<circle cx="${cx}" cy="${y(l.p99).toFixed(1)}" r="4" fill="${color}"/>`);
      out.push(text(x(l.offeredRate) + 6, y(l.p99) - 6, l.label, `fill="${color}" font-size="10"`));
    }
    // The legend: the three line styles of this dialect.
    const [lx, ly] = [RIGHT + 24, TOP + 6 + i * 70];
    out.push(text(lx, ly, s.title, 'font-weight="bold"'));
    const styles = [
      ['stroke-width="2"', 'p99'],
      ['stroke-width="1.5" stroke-dasharray="6 4"', 'p50'],
      ['stroke-width="1.5" stroke-dasharray="2 4"', threshold],
    ];
    styles.forEach(([style, name], k) =>
      out.push(line(lx, ly + 12 + 16 * k, lx + 28, ly + 12 + 16 * k, `stroke="${color}" ${style}`), text(lx + 36, ly + 16 + 16 * k, name!)),
    );
  });
  const notes = [
    'Target: p99 at 25% and at 50%',
    `of (1) ≤ ${threshold} at 5% of (1).`,
    '(1): bare projection limit,',
    '(2): worker throughput, both',
    'measured in the same run.',
  ];
  notes.forEach((n, i) => out.push(text(RIGHT + 24, TOP + 6 + series.length * 70 + i * 15, n, 'fill="#444444" font-size="11"')));

  const columns: Array<[string, number, string]> = [
    ['', 0, 'start'],
    ['level', 110, 'start'],
    ['offered/s', 290, 'end'],
    ['achieved/s', 390, 'end'],
    ['p50 ms', 470, 'end'],
    ['p99 ms', 550, 'end'],
    ['p99 ÷ trickle p99', 680, 'end'],
  ];
  const tableRow = (cells: readonly string[], row: number, bold = '') =>
    cells.forEach((cell, c) => out.push(text(LEFT + columns[c]![1], tableTop + row * ROW_HEIGHT, cell, `text-anchor="${columns[c]![2]}"${bold}`)));
  tableRow(
    columns.map(([title]) => title),
    0,
    ' font-weight="bold"',
  );
  let row = 1;
  for (const s of series) {
    const trickle = s.levels.find((l) => l.role === 'trickle');
    for (const l of s.levels) {
      const role = l.role === 'target' ? '' : ` (${l.role})`;
      tableRow(
        [
          s.title,
          `${l.label}${role}`,
          fixed(l.offeredRate, 0),
          fixed(l.achievedRate, 0),
          fixed(l.p50, 2),
          fixed(l.p99, 2),
          trickle ? `${fixed(l.p99 / trickle.p99, 2)}×` : '-',
        ],
        row++,
      );
    }
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
