import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { NATS_TEST_MAX_PAYLOAD } from './privateNats.js';
import { freePort } from './freePort.js';
import { natsServerBinary } from './privateNats.js';

/**
 * A JetStream cluster of nats-servers on loopback for failover tests: each node has its
 * `server_name`, a client port, a route port, a monitoring port and a JetStream store of its own,
 * all fixed at creation, so a node killed and started again comes back as the same member with its
 * store (what a restarted machine does).
 */

interface ClusterNode {
  /** Its `server_name`, which stream info's `cluster.leader` names. */
  readonly name: string;
  readonly url: string;
  /** Whether its process runs now. */
  readonly running: boolean;
}

export interface NatsCluster {
  readonly nodes: readonly ClusterNode[];
  /** Every node's URL, comma separated: a NATS_URL that reaches whichever nodes are up. */
  readonly urls: string;
  node(name: string): ClusterNode;
  /** SIGKILL the node and wait for its exit: no shutdown, no leadership handed over. */
  kill(name: string): Promise<void>;
  /** Starts a killed node again on its ports and store, and waits until it is ready. */
  restart(name: string): Promise<void>;
  /** The names of the clients connected to the node now (its /connz), [] when it is down. */
  clientNames(name: string): Promise<string[]>;
  /** The last lines the node logged, for a failure's message. */
  output(name: string): string;
  /** SIGTERM every running node (SIGKILL after 5 s) and removes the stores. Idempotent. */
  stop(): Promise<void>;
}

interface Node extends ClusterNode {
  running: boolean;
  child: ChildProcess | undefined;
  out: string;
  configFile: string;
  monitorPort: number;
}

const CLUSTER_NAME = 'pp_test';

/**
 * Starts `size` nodes forming one JetStream cluster and resolves once the cluster has elected its
 * meta leader (before that, creating a stream fails). A node that cannot start stops the others.
 */
export async function startNatsCluster(size = 3, options: { readyTimeoutMs?: number } = {}): Promise<NatsCluster> {
  const binary = natsServerBinary();
  if (!binary) throw new Error('nats-server is not installed');
  const dir = mkdtempSync(join(tmpdir(), 'pp-nats-cluster-'));
  const ports = await Promise.all(Array.from({ length: size }, async () => ({ client: await freePort(), route: await freePort(), monitor: await freePort() })));
  const routes = ports.map((p) => `nats-route://127.0.0.1:${p.route}`);
  const nodes: Node[] = ports.map((p, i) => {
    const name = `n${i + 1}`;
    const store = join(dir, name);
    mkdirSync(store);
    const configFile = join(dir, `${name}.conf`);
    // Every route listed on every node, its own included: nats-server ignores a route to itself.
    writeFileSync(
      configFile,
      [
        `server_name: ${name}`,
        `listen: 127.0.0.1:${p.client}`,
        // The worker refuses a server that cannot carry its largest message (ADR 0019).
        `max_payload: ${NATS_TEST_MAX_PAYLOAD}`,
        `http: 127.0.0.1:${p.monitor}`,
        `jetstream { store_dir: "${store}", max_memory_store: 256MB, max_file_store: 2GB }`,
        `cluster { name: ${CLUSTER_NAME}, listen: 127.0.0.1:${p.route}, routes: [${routes.join(', ')}] }`,
      ].join('\n'),
    );
    return { name, url: `nats://127.0.0.1:${p.client}`, child: undefined, out: '', configFile, monitorPort: p.monitor, running: false };
  });

  const launch = async (node: Node) => {
    const child = spawn(binary, ['-c', node.configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    node.child = child;
    node.running = true;
    child.once('exit', () => {
      node.running = false;
    });
    await new Promise<void>((resolve, reject) => {
      let ready = false;
      const onData = (d: Buffer) => {
        // Bounded: a node lives for the whole test, and a failure only needs the tail.
        node.out = (node.out + d.toString()).slice(-20_000);
        if (!ready && node.out.includes('Server is ready')) {
          ready = true;
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`nats-server ${node.name} exited (${code}) before it was ready:\n${node.out}`)));
    });
  };
  const exited = (node: Node) =>
    new Promise<void>((resolve) => {
      if (!node.child || node.child.exitCode !== null || node.child.signalCode !== null) resolve();
      else node.child.once('exit', () => resolve());
    });
  const byName = (name: string) => {
    const node = nodes.find((n) => n.name === name);
    if (!node) throw new Error(`no node ${name}`);
    return node;
  };

  let stopped: Promise<void> | undefined;
  const cluster: NatsCluster = {
    nodes,
    urls: nodes.map((n) => n.url).join(','),
    node: byName,
    async kill(name) {
      const node = byName(name);
      node.child?.kill('SIGKILL');
      await exited(node);
    },
    async restart(name) {
      const node = byName(name);
      if (node.running) throw new Error(`node ${name} is running`);
      node.out = '';
      await launch(node);
    },
    async clientNames(name) {
      const node = byName(name);
      if (!node.running) return [];
      const response = await fetch(`http://127.0.0.1:${node.monitorPort}/connz?limit=1024`);
      const body = (await response.json()) as { connections?: Array<{ name?: string }> };
      return (body.connections ?? []).map((c) => c.name ?? '');
    },
    output: (name) => byName(name).out,
    stop() {
      stopped ??= (async () => {
        await Promise.all(
          nodes.map(async (node) => {
            if (!node.running) return;
            node.child!.kill('SIGTERM');
            const timer = setTimeout(() => node.child!.kill('SIGKILL'), 5000);
            await exited(node);
            clearTimeout(timer);
          }),
        );
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };

  try {
    await Promise.all(nodes.map(launch));
    await waitForMetaLeader(cluster.urls, options.readyTimeoutMs ?? 30_000);
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

/** Polls the JetStream account info, which answers only once the cluster has a meta leader. */
async function waitForMetaLeader(urls: string, timeoutMs: number): Promise<void> {
  const nc: NatsConnection = await connect({ servers: urls.split(','), name: 'pp-cluster-probe' });
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 2000 });
        await jsm.getAccountInfo();
        return;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`the cluster elected no JetStream meta leader in ${timeoutMs} ms`, { cause: err });
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await nc.close();
  }
}
