import { z } from 'zod';

/**
 * A message creation request from outside the process (bus or HTTP). Unknown keys are stripped, so
 * `completed_turn` / `completedTurn` can never reach the repository's internal lifecycle-turn path
 * (spec AC-7): only the agent-boot code path sets it, in-process.
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

export type CreateMessageRequest = z.infer<typeof createMessageRequestSchema>;
