// A bridge from this service's prompt stream to agents driven over HTTP, the way Kandev drives its
// agents through agentctl: docs/kandev.md#the-agent-side says what it stands for.
//
// Each prompt the worker delivers (a `session.prompt` envelope on `<prefix>agent.<session_id>.prompt`)
// is forwarded once as `POST <AGENT_URL>/prompt`. Delivery stays at most once end to end: the bridge
// acknowledges the prompt to JetStream, and waits for the server to confirm that acknowledgement,
// BEFORE it calls the agent, and it never calls the agent twice for one prompt. A prompt the agent
// refuses, or a call that fails or times out, is reported and dropped, never retried: the agent may
// have started on it, and a prompt done twice is worse than one the user sends again.
//
//   NATS_URL         the worker's NATS (default nats://127.0.0.1:4222)
//   NATS_USER, NATS_PASSWORD, NATS_INBOX_PREFIX
//                    the shipped roles' `agent` user, its password and its inbox `_INBOX_agent`
//                    (deploy/nats/; none by default)
//   SUBJECT_PREFIX   the worker's SUBJECT_PREFIX (default empty)
//   AGENT_URL        the agent's HTTP base URL (default http://127.0.0.1:9999)
//   AGENT_TIMEOUT_MS how long one call to the agent may take (default 30000)
//   BRIDGE_CONSUMER  the bridge's durable consumer on the prompt stream (default agentctl-bridge)
//
// Start it after the worker (the worker creates the prompt stream). One JSON line per prompt on
// stdout; SIGTERM or SIGINT finishes the prompt in hand, then exits 0.
import { connect } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { topologyFor } from 'pending-projector';

/** The fields of a `session.prompt` envelope's data this bridge reads (docs/endpoints.md, "Agent-side subjects"). */
interface SessionPrompt {
  receipt_id: string;
  session_id: string;
  task_id: string;
  turn_id: string;
  message_id: string;
  content: string;
  attachments: Array<{ id: string; name: string; mime_type: string; size_bytes: number; storage_key: string }>;
  model: string;
  plan_mode: boolean;
}

const agentUrl = (process.env.AGENT_URL ?? 'http://127.0.0.1:9999').replace(/\/+$/, '');
const agentTimeoutMs = Number(process.env.AGENT_TIMEOUT_MS ?? 30_000);
const durable = process.env.BRIDGE_CONSUMER ?? 'agentctl-bridge';
const topology = topologyFor(process.env.SUBJECT_PREFIX ?? '');

const log = (fields: Record<string, unknown>) => console.log(JSON.stringify({ time: new Date().toISOString(), ...fields }));

// Receipt ids already acknowledged: the worker publishes each prompt once, but the contract asks
// agents to dedupe on receipt_id anyway. In memory and bounded, oldest forgotten first.
const seen = new Set<string>();
function remember(receiptId: string) {
  seen.add(receiptId);
  if (seen.size > 10_000) seen.delete(seen.values().next().value!);
}

/** One call to the agent: the outcome, never a throw. */
async function forward(prompt: SessionPrompt): Promise<{ ok: boolean; status?: number; error?: string }> {
  try {
    const response = await fetch(`${agentUrl}/prompt`, {
      method: 'POST',
      // The receipt id doubles as an idempotency key, for an agent that can dedupe on its side too.
      headers: { 'content-type': 'application/json', 'idempotency-key': prompt.receipt_id },
      body: JSON.stringify({
        session_id: prompt.session_id,
        task_id: prompt.task_id,
        turn_id: prompt.turn_id,
        message_id: prompt.message_id,
        receipt_id: prompt.receipt_id,
        content: prompt.content,
        attachments: prompt.attachments,
        model: prompt.model,
        plan_mode: prompt.plan_mode,
      }),
      signal: AbortSignal.timeout(agentTimeoutMs),
    });
    await response.body?.cancel();
    return { ok: response.ok, status: response.status };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}

async function handle(m: JsMsg) {
  let prompt: SessionPrompt;
  try {
    prompt = m.json<{ data: SessionPrompt }>().data;
    if (typeof prompt?.receipt_id !== 'string' || typeof prompt.session_id !== 'string' || typeof prompt.content !== 'string') throw new Error('not a prompt');
  } catch (err) {
    // Never deliverable: stop JetStream from offering it again.
    m.term();
    log({ level: 'error', msg: 'malformed prompt dropped', subject: m.subject, seq: m.seq, error: (err as Error).message });
    return;
  }
  const ids = { receipt_id: prompt.receipt_id, session_id: prompt.session_id };
  if (seen.has(prompt.receipt_id)) {
    m.ack();
    log({ level: 'warn', msg: 'duplicate prompt dropped', ...ids });
    return;
  }
  // The acknowledgement is the bridge's at-most-once marker, taken before the agent is called. If
  // the server does not confirm it, the agent is not called: either the ack was lost and JetStream
  // offers the prompt again (then it is forwarded), or it was recorded and the prompt is lost, never doubled.
  const acked = await m.ackAck().catch(() => false);
  if (!acked) {
    log({ level: 'error', msg: 'acknowledgement not confirmed; prompt not forwarded', ...ids });
    return;
  }
  remember(prompt.receipt_id);
  const outcome = await forward(prompt);
  if (outcome.ok) log({ level: 'info', msg: 'prompt forwarded', ...ids, status: outcome.status });
  else log({ level: 'error', msg: 'agent did not take the prompt; not retried', ...ids, status: outcome.status, error: outcome.error });
}

const nc = await connect({
  servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
  name: 'agentctl-bridge',
  user: process.env.NATS_USER || undefined,
  pass: process.env.NATS_PASSWORD || undefined,
  inboxPrefix: process.env.NATS_INBOX_PREFIX || undefined,
});
try {
  // One durable consumer over every session's prompts: it remembers what was acknowledged across
  // restarts, and bridges started under one name share it. A consumer under a new name starts from
  // the oldest prompt the stream still holds, so keep the name: a rename sends those again.
  await (
    await jetstreamManager(nc)
  ).consumers.add(topology.agentPromptStream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: topology.agentPromptSubjects[0],
  });
  const messages = await (await jetstream(nc).consumers.get(topology.agentPromptStream, durable)).consume({ max_messages: 1 });
  const stop = () => void messages.close();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  log({ level: 'info', msg: 'bridge ready', stream: topology.agentPromptStream, consumer: durable, agent: `${agentUrl}/prompt` });
  // One prompt at a time, in stream order: the loop takes the next only once this one is settled.
  for await (const m of messages) await handle(m);
} finally {
  await nc.drain();
}
