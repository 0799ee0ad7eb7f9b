/**
 * Randomness, ids and message shapes for seedPlan.ts: a seeded stream per session, unique ids that
 * index like random UUIDs, and the rows Kandev writes (ordinary output, clarification bundles,
 * permission requests). Pure, like seedPlan.ts.
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

export interface PlannedMessage {
  type: string;
  authorType: 'user' | 'agent';
  content: string;
  requestsInput: boolean;
  metadata: Record<string, unknown>;
}

const FILLER =
  'Looking at the failing test, the fixture builds the session before the workspace exists, so the ' +
  'lookup returns nothing and the handler falls back to the default profile. I will move the setup.';

export function ordinaryMessage(g: Gen, authorType: 'user' | 'agent'): PlannedMessage {
  const { rng } = g;
  const content = FILLER.slice(0, intBetween(rng, 40, FILLER.length));
  if (authorType === 'user') return { type: 'message', authorType, content, requestsInput: false, metadata: {} };
  const r = rng();
  if (r < 0.55) return { type: 'message', authorType, content, requestsInput: false, metadata: {} };
  if (r < 0.8) {
    return {
      type: 'tool_call',
      authorType,
      content: 'Run tests',
      requestsInput: false,
      metadata: { tool_call_id: g.id(), title: 'npm test', status: 'complete' },
    };
  }
  if (r < 0.9) return { type: 'thinking', authorType, content, requestsInput: false, metadata: { thinking: true } };
  return { type: 'status', authorType, content: 'Agent is working', requestsInput: false, metadata: { progress: 40 } };
}

export function clarificationBundle(g: Gen, statuses: Array<string | undefined>): PlannedMessage[] {
  const pendingId = g.id();
  return statuses.map((status, index) => {
    const questionId = `q${index + 1}`;
    const metadata: Record<string, unknown> = {
      pending_id: pendingId,
      question_id: questionId,
      question: {
        id: questionId,
        title: `Question ${index + 1}`,
        prompt: `Which option for question ${index + 1}?`,
        options: [
          { option_id: 'a', label: 'A', description: '' },
          { option_id: 'b', label: 'B', description: '' },
        ],
      },
      question_index: index,
      question_total: statuses.length,
      context: 'benchmark',
    };
    if (status !== undefined) metadata.status = status;
    return {
      type: 'clarification_request',
      authorType: 'agent',
      content: `Question ${index + 1}`,
      requestsInput: index === statuses.length - 1,
      metadata,
    };
  });
}

export function permissionRequest(g: Gen, status: string | undefined): PlannedMessage {
  const metadata: Record<string, unknown> = {
    pending_id: g.id(),
    tool_call_id: g.id(),
    action_type: 'bash',
    title: 'rm -rf node_modules && npm ci',
  };
  if (status !== undefined) metadata.status = status;
  return { type: 'permission_request', authorType: 'agent', content: 'Allow command?', requestsInput: true, metadata };
}

/** Pending clarification statuses: all pending, all absent (legacy), or partly answered. */
function pendingStatuses(g: Gen): Array<string | undefined> {
  const { rng } = g;
  const n = intBetween(rng, 1, 3);
  const r = rng();
  if (r < 0.6) return Array.from({ length: n }, () => 'pending');
  if (r < 0.85) return Array.from({ length: n }, () => undefined);
  return Array.from({ length: n }, (_, i) => (i === 0 ? 'answered' : 'pending'));
}

/** The special rows the current turn ends with (the part that decides the pending action). */
export function currentTurnSpecials(g: Gen): PlannedMessage[] {
  const { rng } = g;
  const r = rng();
  if (r < 0.14) return clarificationBundle(g, pendingStatuses(g));
  if (r < 0.24) return clarificationBundle(g, Array.from({ length: intBetween(rng, 1, 3) }, () => 'answered'));
  if (r < 0.34) {
    const older = rng() < 0.5 ? [permissionRequest(g, 'approved')] : [];
    return [...older, permissionRequest(g, rng() < 0.7 ? 'pending' : undefined)];
  }
  if (r < 0.42) return [permissionRequest(g, 'pending'), permissionRequest(g, rng() < 0.5 ? 'approved' : 'rejected')];
  if (r < 0.47) return [permissionRequest(g, 'pending'), ...clarificationBundle(g, pendingStatuses(g))];
  return [];
}
