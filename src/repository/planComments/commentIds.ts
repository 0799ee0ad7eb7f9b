import { createHash } from 'node:crypto';

/**
 * Plan comment ids as Kandev addresses them: Kandev's comment service requires UUIDs, and its
 * browser migration keeps each legacy draft's own UUID as the comment's id. So beside Kandev's
 * tables a new comment's id must be a UUID, and an imported draft keeps its UUID (a draft that
 * Kandev's browser migrated already is then found, not imported twice); only a draft whose id is
 * not a UUID gets a derived one, a UUIDv5 of (task, session, draft id), stable across imports.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The namespace of derived draft ids (a constant of this service: changing it would import every such draft again). */
const LEGACY_DRAFT_NAMESPACE = '3f1d7c5e-8a2b-4c6d-9e0f-1a2b3c4d5e6f';

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** RFC 9562 UUIDv5: SHA-1 of the namespace's 16 bytes and the name, with the version and variant bits set. */
export function uuidV5(namespace: string, name: string): string {
  const bytes = createHash('sha1')
    .update(Buffer.from(namespace.replace(/-/g, ''), 'hex'))
    .update(name, 'utf8')
    .digest()
    .subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The comment id of an imported draft: its own UUID (lower case), else the derived UUIDv5. */
export function legacyCommentId(taskId: string, sessionId: string, draftId: string): string {
  return isUuid(draftId) ? draftId.toLowerCase() : uuidV5(LEGACY_DRAFT_NAMESPACE, `${taskId}|${sessionId}|${draftId}`);
}

/** The id the first imports gave a draft (`legacy:` + SHA-256), still looked up so an import repeated after the upgrade creates nothing. */
export function previousLegacyCommentId(taskId: string, sessionId: string, draftId: string): string {
  return `legacy:${createHash('sha256').update(`${taskId}|${sessionId}|${draftId}`).digest('hex')}`;
}
