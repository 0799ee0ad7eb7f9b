/**
 * The soak's one source of randomness: mulberry32, a 32-bit generator small enough to read at a
 * glance. Every choice the soak makes (which task, which step, which fault, when) comes from it, so
 * a seed names a run: the same seed replays the same schedule of choices (the timing of the
 * processes around it still varies from run to run).
 */
export interface SeededRandom {
  readonly seed: number;
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T;
  /** A copy of `items` in random order (Fisher-Yates). */
  shuffled<T>(items: readonly T[]): T[];
  /** One of the keys of `weights`, each with a chance proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K;
}

/**
 * The generator of one part of the soak (`stream` 0, 1, ...): each part draws from its own sequence,
 * so the faults' schedule for a seed stays the same however the workload's timing interleaves.
 */
export function seededStream(seed: number, stream: number): SeededRandom {
  return createSeededRandom((seed ^ Math.imul(stream + 1, 0x9e3779b9)) >>> 0);
}

function createSeededRandom(seed: number): SeededRandom {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const random: SeededRandom = {
    seed,
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => {
      if (items.length === 0) throw new Error('pick from an empty list');
      return items[Math.floor(next() * items.length)]!;
    },
    shuffled: (items) => {
      const out = [...items];
      for (let i = out.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [out[i], out[j]] = [out[j]!, out[i]!];
      }
      return out;
    },
    weighted: (weights) => {
      const entries = Object.entries(weights) as Array<[keyof typeof weights, number]>;
      const total = entries.reduce((sum, [, w]) => sum + w, 0);
      let roll = next() * total;
      for (const [key, w] of entries) {
        roll -= w;
        if (roll < 0) return key;
      }
      return entries.at(-1)![0];
    },
  };
  return random;
}
