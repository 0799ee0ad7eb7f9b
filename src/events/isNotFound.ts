/** True when JetStream says the stream or consumer asked for does not exist. */
export function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; message?: string; name?: string };
  return e?.name === 'StreamNotFoundError' || e?.name === 'ConsumerNotFoundError' || /not found/i.test(String(e?.message ?? ''));
}
