import type { z } from 'zod';

/** `answers[0].text`: a field's path as a caller writes it; empty for the body itself. */
function pathOf(path: readonly PropertyKey[]): string {
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i === 0 ? '' : '.'}${String(key)}`)).join('');
}

/** One issue in plain words: zod's message without its "Invalid input:" heading. */
function wordsOf(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown field${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  if (issue.code === 'invalid_type' && / received undefined$/.test(issue.message)) return `required (expected ${issue.expected})`;
  return issue.message.replace(/^Invalid (input|option|value|string|number|key)s?: /i, '').replace(/"\|"/g, '", "');
}

/**
 * Why a body does not match its schema, as one plain sentence a caller can read in a log: each
 * problem as `field: what was expected` (`task_id: expected string, received number`), joined
 * with `; `. zod's own rendering (`✖ ... → at task_id`) spans lines and draws symbols.
 */
export function describeRequestIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = pathOf(issue.path);
      return where ? `${where}: ${wordsOf(issue)}` : wordsOf(issue);
    })
    .join('; ');
}
