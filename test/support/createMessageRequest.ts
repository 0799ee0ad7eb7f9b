import { z } from 'zod';

/**
 * A message creation request as it would arrive from outside the process (bus or HTTP). Unknown keys
 * are stripped, so `completed_turn` / `completedTurn` can never reach the repository's internal
 * lifecycle-turn path: only the agent-boot code path sets it, in-process. The service serves no such
 * request; the tests hold the schema to show that no external input can set the option.
 */
export const createMessageRequestSchema = z
  .object({
    session_id: z.string().min(1).max(128),
    turn_id: z.string().min(1).max(128).optional(),
    author_type: z.enum(['user', 'agent']).default('user'),
    author_id: z.string().max(256).default(''),
    content: z.string().max(1_000_000),
    type: z.string().min(1).max(64).default('message'),
    requests_input: z.boolean().default(false),
    metadata: z.record(z.string(), z.unknown()).default({}),
  })
  .strip();
