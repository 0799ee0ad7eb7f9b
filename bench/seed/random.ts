/**
 * Reproducible randomness for the seeded data: a seeded stream per session or task, weighted picks,
 * and unique ids that spread over an index like random UUIDs. Pure.
 */

/** mulberry32: small, fast, good enough to make a benchmark mix reproducible. */
export function createRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * v4-shaped UUIDs: random leading digits from `rng`, so ids spread over an index like real ones, and
 * `owner` plus a counter in the last group, so they are unique across sessions. (Seeded mulberry32
 * streams of different sessions overlap, so randomness alone repeats ids at this scale.)
 */
export function createIdSource(rng: () => number, owner: number): () => string {
  let counter = 0;
  return () => {
    let hex = '';
    for (let i = 0; i < 18; i += 1) hex += Math.floor(rng() * 16).toString(16);
    const unique = (owner * 4096 + counter).toString(16).padStart(12, '0');
    counter += 1;
    if (counter > 4096) throw new Error(`more than 4096 ids for owner ${owner}`);
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(12, 15)}-a${hex.slice(15, 18)}-${unique}`;
  };
}

/** A session's generator: its random stream and its id source. */
export interface Gen {
  rng: () => number;
  id: () => string;
}

export function pick<T>(rng: () => number, weights: ReadonlyArray<[T, number]>): T {
  const total = weights.reduce((sum, [, w]) => sum + w, 0);
  let r = rng() * total;
  for (const [value, w] of weights) {
    r -= w;
    if (r < 0) return value;
  }
  return weights[weights.length - 1]![0];
}

export function intBetween(rng: () => number, min: number, max: number): number {
  return min + Math.floor(rng() * (max - min + 1));
}
