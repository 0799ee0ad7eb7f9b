import type { JetStreamManager } from '@nats-io/jetstream';
import { topologyStreams, type Topology } from '../contract/subjects.js';

/**
 * Deletes every stream the worker creates for `topology`, the KV bucket's included, and with them
 * their consumers: what a throwaway deployment (the sandbox, the demo) leaves behind. A stream
 * already gone is not an error. Returns the streams it deleted.
 */
export async function removeTopology(jsm: JetStreamManager, topology: Topology): Promise<string[]> {
  const deleted: string[] = [];
  for (const stream of topologyStreams(topology)) {
    const existed = await jsm.streams.info(stream).then(
      () => true,
      () => false,
    );
    if (existed && (await jsm.streams.delete(stream))) deleted.push(stream);
  }
  return deleted;
}
