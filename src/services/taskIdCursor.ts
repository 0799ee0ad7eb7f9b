import { idProblem } from '../storableText.js';

/**
 * The cursor of a listing in task id order (`task.list`, `summary.verify`): the page's last task
 * id, base64url. Opaque to clients; one that does not decode to an id this service could have
 * issued is refused.
 */
export const encodeTaskIdCursor = (taskId: string): string => Buffer.from(taskId, 'utf8').toString('base64url');

/** The task id a cursor continues after, or undefined when this service did not issue it. */
export function decodeTaskIdCursor(cursor: string): string | undefined {
  const taskId = Buffer.from(cursor, 'base64url').toString('utf8');
  return encodeTaskIdCursor(taskId) === cursor && idProblem(taskId) === undefined ? taskId : undefined;
}
