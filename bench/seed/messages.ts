/**
 * The message rows Kandev writes, as the seeders plan them: ordinary agent output, clarification
 * bundles and permission requests. Pure. `clarificationMetadata` is the one shape of a clarification
 * row's metadata, shared by the bulk plan (sessionPlan.ts) and the row-at-a-time fixtures.
 */
import { intBetween, type Gen } from './random.js';

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

/** One question of a clarification bundle: Kandev writes one row per question, sharing `pending_id`. */
export interface ClarificationQuestion {
  pendingId: string;
  index: number;
  total: number;
  /** `undefined` leaves the status key out (legacy rows have none). */
  status: string | undefined;
  /** Free text Kandev stores with the question; it tells seeded rows apart when read by hand. */
  context: string;
  /** Merged in after the standard keys (a test's extra metadata). */
  extra?: Record<string, unknown>;
}

export function clarificationMetadata(q: ClarificationQuestion): Record<string, unknown> {
  const questionId = `q${q.index + 1}`;
  const metadata: Record<string, unknown> = {
    pending_id: q.pendingId,
    question_id: questionId,
    question: {
      id: questionId,
      title: `Question ${q.index + 1}`,
      prompt: `Which option for question ${q.index + 1}?`,
      options: [
        { option_id: 'a', label: 'A', description: '' },
        { option_id: 'b', label: 'B', description: '' },
      ],
    },
    question_index: q.index,
    question_total: q.total,
    context: q.context,
    ...q.extra,
  };
  if (q.status !== undefined) metadata.status = q.status;
  return metadata;
}

export function clarificationBundle(g: Gen, statuses: Array<string | undefined>): PlannedMessage[] {
  const pendingId = g.id();
  return statuses.map((status, index) => ({
    type: 'clarification_request',
    authorType: 'agent',
    content: `Question ${index + 1}`,
    requestsInput: index === statuses.length - 1,
    metadata: clarificationMetadata({ pendingId, index, total: statuses.length, status, context: 'benchmark' }),
  }));
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
  if (r < 0.24)
    return clarificationBundle(
      g,
      Array.from({ length: intBetween(rng, 1, 3) }, () => 'answered'),
    );
  if (r < 0.34) {
    const older = rng() < 0.5 ? [permissionRequest(g, 'approved')] : [];
    return [...older, permissionRequest(g, rng() < 0.7 ? 'pending' : undefined)];
  }
  if (r < 0.42) return [permissionRequest(g, 'pending'), permissionRequest(g, rng() < 0.5 ? 'approved' : 'rejected')];
  if (r < 0.47) return [permissionRequest(g, 'pending'), ...clarificationBundle(g, pendingStatuses(g))];
  return [];
}
