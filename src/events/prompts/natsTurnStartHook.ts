import { errors, RequestError, type NatsConnection } from '@nats-io/transport-node';
import type { TurnStartHook, TurnStartRequest, TurnStartResult } from '../../services/prompts/turnStartHook.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The turn-start hook as a NATS request: `request` as JSON to `subject` (the deployment prefix
 * plus TURN_START_HOOK_SUBJECT); a reply `{"ok": true}` within `timeoutMs` lets admission go on.
 * Anything else is a failure outcome (see TurnStartResult), never an exception.
 */
export class NatsTurnStartHook implements TurnStartHook {
  constructor(
    private readonly nc: NatsConnection,
    readonly subject: string,
    readonly timeoutMs: number,
  ) {}

  async beforePrompt(request: TurnStartRequest): Promise<TurnStartResult> {
    let reply;
    try {
      reply = await this.nc.request(this.subject, encoder.encode(JSON.stringify(request)), { timeout: this.timeoutMs });
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders())
        return { ok: false, reason: 'no_responders', detail: `nobody serves the turn-start hook subject ${this.subject}` };
      if (err instanceof errors.TimeoutError) return { ok: false, reason: 'timeout', detail: `the turn-start hook did not reply within ${this.timeoutMs} ms` };
      return { ok: false, reason: 'transport', detail: (err as Error).message };
    }
    let body: unknown;
    try {
      body = JSON.parse(decoder.decode(reply.data));
    } catch {
      return { ok: false, reason: 'rejected', detail: 'the turn-start hook replied with invalid JSON' };
    }
    if (body && typeof body === 'object' && (body as { ok?: unknown }).ok === true) return { ok: true };
    return { ok: false, reason: 'rejected', detail: `the turn-start hook replied ${JSON.stringify(body).slice(0, 200)}` };
  }
}
