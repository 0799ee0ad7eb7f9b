import type { NatsConnection } from '@nats-io/transport-node';
import pino, { type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerComponent } from '../../src/bin/worker/component.js';
import { startWorker } from '../../src/bin/worker.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, uniquePrefix } from '../support/nats.js';
import { seedSession } from '../support/seed.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const COMPONENTS_IN_START_ORDER = [
  'health-server',
  'consumer-lag-probe',
  'summary-bucket-refiller',
  'projections',
  'event-consumer',
  'prompt-dispatcher',
  'delivery-recovery',
  'plan-comment-events',
  'service-endpoints',
  'boot-reconcile',
];

/** A debug logger whose lines the test reads back: the worker logs each component it starts and stops. */
function capturedLogs(): { logger: Logger; components(msg: 'component started' | 'component stopped'): string[] } {
  const lines: Array<{ msg: string; workerComponent?: string }> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
  return { logger, components: (msg) => lines.filter((l) => l.msg === msg).map((l) => l.workerComponent!) };
}

const healthz = (port: number) => fetch(`http://127.0.0.1:${port}/healthz`).then((res) => res.status);

describe('the worker lifecycle over a real NATS on sqlite', () => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;

  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
    nc = await connectTestNats();
    prefix = uniquePrefix('lifecycle');
    await seedSession(t.ctx);
  });
  afterAll(async () => {
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('stops its components in the reverse order it started them, each once however often stop() is called', async () => {
    const logs = capturedLogs();
    const worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { bootReconcile: true }), logger: logs.logger });
    expect(await worker.bootReconcile).toMatchObject({ visited: 1, drifted: 1, repaired: 1 });
    expect(logs.components('component started')).toEqual(COMPONENTS_IN_START_ORDER);
    expect(logs.components('component stopped')).toEqual([]);
    expect(await healthz(worker.healthPort)).toBe(200);

    await Promise.all([worker.stop(), worker.stop()]);
    await worker.stop();

    expect(logs.components('component stopped')).toEqual([...COMPONENTS_IN_START_ORDER].reverse());
    await expect(healthz(worker.healthPort)).rejects.toThrow();
  });

  it('stops the components already started, in reverse order, when one fails to start, and rejects with its error', async () => {
    const logs = capturedLogs();
    const refused = new Error('this component refuses to start');
    let healthPort = 0;
    let healthWhileStarting: number | undefined;
    const arrange = (components: readonly WorkerComponent[]) => {
      const health = components.find((c) => c.name === 'health-server') as WorkerComponent & { readonly port: number };
      const failing: WorkerComponent = {
        name: 'failing',
        async start() {
          healthPort = health.port;
          healthWhileStarting = await healthz(healthPort);
          throw refused;
        },
        stop: () => Promise.reject(new Error('a component that did not start is not stopped')),
      };
      const endpointsAt = components.findIndex((c) => c.name === 'service-endpoints');
      return [...components.slice(0, endpointsAt), failing, ...components.slice(endpointsAt)];
    };

    await expect(startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: logs.logger, arrangeComponents: arrange })).rejects.toBe(refused);

    const startedBeforeTheFailure = COMPONENTS_IN_START_ORDER.slice(0, COMPONENTS_IN_START_ORDER.indexOf('service-endpoints'));
    expect(logs.components('component started')).toEqual(startedBeforeTheFailure);
    expect(logs.components('component stopped')).toEqual([...startedBeforeTheFailure].reverse());
    expect(healthWhileStarting).toBe(200);
    await expect(healthz(healthPort)).rejects.toThrow();
    // The endpoints after it never started: nobody answers their subjects.
    await expect(nc.request(topologyFor(prefix).serviceSubject('summary.get'), '{}', { timeout: 2000 })).rejects.toThrow(/503|no responders/i);
  });
});
