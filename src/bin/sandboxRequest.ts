import { RequestError, type NatsConnection } from '@nats-io/transport-node';
import type { Config } from '../config.js';
import { topologyFor } from '../contract/subjects.js';
import { ENDPOINT_SPECS, ENDPOINTS } from '../contract/endpoints.js';
import { connectNats } from './connectNats.js';
import type { SandboxClientSettings } from './commandSettings.js';

/**
 * `pending-projector sandbox request <endpoint> [json]` and `pending-projector sandbox watch`: what
 * `nats req` and `nats sub` do for the worker's subjects, for those without the NATS CLI. They work
 * against any worker (give its --subject-prefix), not only a sandbox's.
 */

const ENDPOINT_NAMES: readonly string[] = Object.values(ENDPOINTS);
// As the typed client: clarification.respond may wait for the agent's confirmation, then a refresh.
const RESPOND_TIMEOUT_MS = 65_000;
const TIMEOUT_MS = 10_000;
// Every replica answers these; their replies are gathered for this long, as the typed client does.
const EVERY_REPLICA = new Set<string>(ENDPOINT_SPECS.filter((spec) => 'everyReplica' in spec && spec.everyReplica).map((spec) => spec.name));
const GATHER_MS = 1000;

/** Sends `body` (JSON text, sent as given) to the endpoint; prints the reply; exit 0 when it is `ok: true`. */
export async function runSandboxRequest(config: SandboxClientSettings, positionals: readonly string[]): Promise<number> {
  const [endpoint, body = '{}', ...extra] = positionals;
  if (!endpoint || !ENDPOINT_NAMES.includes(endpoint) || extra.length > 0) {
    process.stderr.write(
      `${endpoint && !ENDPOINT_NAMES.includes(endpoint) ? `unknown endpoint ${JSON.stringify(endpoint)}. ` : ''}` +
        `usage: pending-projector sandbox request <endpoint> '<json body>' [--subject-prefix P]\nendpoints: ${ENDPOINT_NAMES.join(', ')}\n`,
    );
    return 2;
  }
  const subject = topologyFor(config.subjectPrefix).serviceSubject(endpoint);
  const nc = await connectNats(config, 'pending-projector-request');
  try {
    const text = EVERY_REPLICA.has(endpoint)
      ? await gathered(nc, subject, body)
      : (await nc.request(subject, body, { timeout: endpoint === ENDPOINTS.clarificationRespond ? RESPOND_TIMEOUT_MS : TIMEOUT_MS })).string();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      process.stdout.write(`${text}\n`);
      return 1;
    }
    process.stdout.write(`${JSON.stringify(parsed, null, 2)}\n`);
    return (parsed as { ok?: unknown }).ok === true ? 0 : 1;
  } catch (err) {
    const noWorker = err instanceof RequestError && err.isNoResponders();
    process.stderr.write(
      noWorker
        ? `pending-projector: no worker serves ${subject}: is the sandbox (or a worker) running, with --subject-prefix ${JSON.stringify(config.subjectPrefix)}?\n`
        : `pending-projector: ${subject}: ${(err as Error).message}\n`,
    );
    return 1;
  } finally {
    await nc.close();
  }
}

/**
 * Every replica's reply to `subject`, as one reply: their `replicas` together when one answered ok,
 * else the first failure (the typed client's rule). No reply at all is a no-responders error.
 */
async function gathered(nc: NatsConnection, subject: string, body: string): Promise<string> {
  const replies: Array<{ ok?: unknown; replicas?: unknown[] }> = [];
  for await (const msg of await nc.requestMany(subject, body, { strategy: 'timer', maxWait: GATHER_MS })) replies.push(msg.json());
  const ok = replies.filter((r) => r.ok === true);
  if (ok.length === 0) return JSON.stringify(replies[0] ?? { ok: false, error: { code: 'unavailable', message: `no reply on ${subject}` } });
  return JSON.stringify({ ok: true, replicas: ok.flatMap((r) => r.replicas ?? []) });
}

/** One line per published task summary until SIGINT/SIGTERM; `json`: the envelope as published. */
export async function runSandboxWatch(config: SandboxClientSettings, options: { json: boolean }): Promise<number> {
  const topology = topologyFor(config.subjectPrefix);
  const nc = await connectNats(config, 'pending-projector-watch');
  const sub = nc.subscribe(topology.summarySubject);
  const stop = () => sub.unsubscribe();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Subscribed before this line is printed: a change made after seeing it is shown.
  await nc.flush();
  process.stderr.write(`watching ${topology.summarySubject} (Ctrl-C to stop)\n`);
  for await (const m of sub) {
    if (options.json) {
      process.stdout.write(`${m.string()}\n`);
      continue;
    }
    try {
      const { data } = m.json<{ data: { task_id: string; status_summary: Record<string, unknown> } }>();
      const s = data.status_summary;
      process.stdout.write(
        `task ${data.task_id}  revision ${String(s.revision)}  pending_action=${String(s.pending_action ?? '(none)')}  queued_prompt_count=${String(s.queued_prompt_count ?? 0)}\n`,
      );
    } catch {
      process.stdout.write(`${m.string()}\n`);
    }
  }
  await nc.close();
  return 0;
}
