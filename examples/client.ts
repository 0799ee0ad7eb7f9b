import { connect } from '@nats-io/transport-node';
import { createPendingProjectorClient } from 'pending-projector';

// The worker's NATS and subject prefix (empty by default; `npm run sandbox` prints its own).
const nc = await connect({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
try {
  const client = createPendingProjectorClient(nc, { prefix: process.env.SUBJECT_PREFIX ?? '' });
  const pending = await client.listPending({ limit: 10 });
  if (!pending.ok) throw new Error(`list_pending failed: ${pending.error.code}: ${pending.error.message}`);
  const bundle = pending.bundles[0];
  if (!bundle) console.log('no question is waiting for an answer');
  else {
    const { pending_id, session_id } = bundle;
    const answers = bundle.questions.map((q) => ({ question_id: q.question_id, selected_options: [], custom_text: 'Keep it next to the SQL.' }));
    const reply = await client.respond({ pending_id, answers });
    if (!reply.ok && reply.error.code === 'retryable') {
      // the question is pending again; the same request may be sent again
    }
    console.log(reply.ok ? `answered ${pending_id} (delivery: ${reply.delivery})` : `not answered: ${reply.error.code}`);
    const guard = await client.guard({ session_id }); // blocked: true on any failure
    console.log(`session ${session_id}: blocked=${guard.blocked}`);
  }
} finally {
  await nc.close();
}
