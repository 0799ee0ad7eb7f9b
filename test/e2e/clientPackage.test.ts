import { existsSync } from 'node:fs';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packIntoScratch, run, type PackedScratch } from '../support/packedScratch.js';
import { connectTestNats, deleteTopology, natsAvailable, natsUrl, uniquePrefix } from '../support/nats.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PACKAGE_DIR = join(ROOT, 'packages', 'client');
// Packing runs the build (esbuild, then the declaration bundle, which type-checks zod's types and
// has taken over a minute on a busy 2-core host), then npm installs from its cache.
const SLOW_MS = 5 * 60_000;
const SIZE_LIMIT_BYTES = 5 * 1024 * 1024;

/**
 * What no install of the light package may bring: database drivers and query builders, and the
 * build tools the service package carries. Native modules and install scripts are caught by what
 * they contain, whatever their name.
 */
const FORBIDDEN =
  /^(better-sqlite3|sqlite3|pg|pg-.*|knex|mysql2?|tedious|mssql|oracledb|esbuild|@esbuild\/.*|tsx|typescript|vite|rolldown|@rolldown\/.*|rollup|webpack|dts-bundle-generator|node-gyp|prebuild-install|@mapbox\/node-pre-gyp)$/;

interface InstalledPackage {
  name: string;
  version: string;
  dir: string;
  bytes: number;
  /** Why it cannot be in a light install: a native addon, an install script, a command. */
  heavy: string[];
}

/** A plain Node ESM program of a backend: the typed client over a TCP connection, the schemas, the rules. */
const CONSUMER_SCRIPT = `
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from '@nats-io/transport-node';
import * as light from 'pending-projector-client';
import { newestDurableTurnId } from 'pending-projector-client/turns';

const fixture = JSON.parse(readFileSync(process.env.FIXTURE, 'utf8'));
const nc = await connect({ servers: process.env.NATS_URL });
const served = light.createPendingProjectorClient(nc, { prefix: process.env.PREFIX, timeoutMs: 20000 });
const unserved = light.createPendingProjectorClient(nc, { prefix: process.env.UNSERVED_PREFIX, timeoutMs: 20000 });
const result = {
  sameRules: light.newestDurableTurnId === newestDurableTurnId,
  fixtureMismatches: fixture.cases.filter((c) => newestDurableTurnId(c.turns) !== c.expected_current_turn_id).map((c) => c.name),
  fixtureCases: fixture.cases.length,
  validRequest: light.respondRequestSchema.safeParse({ pending_id: 'p1', answers: [{ question_id: 'q1', selected_options: ['yes'] }] }).success,
  invalidRequest: light.taskRequestSchema.safeParse({ task_id: 42 }).success,
  replyCodes: light.REPLY_ERROR_CODES,
  serviceSubject: light.topologyFor('acme.').serviceSubject(light.ENDPOINTS.summaryGet),
  summary: await served.getSummary({ task_id: 'no-such-task' }),
  unservedSummary: await unserved.getSummary({ task_id: 'no-such-task' }),
  unservedGuard: await unserved.guard({ session_id: 'no-such-session' }),
  nativeAddons: Object.keys(createRequire(import.meta.url).cache).filter((path) => path.endsWith('.node')),
};
await nc.close();
console.log(JSON.stringify(result));
`;

/** A TypeScript consumer, type-checked with no zod installed: the bundled declarations must stand alone. */
const TYPED_CONSUMER = `
import type { NatsConnection } from '@nats-io/nats-core';
import { createPendingProjectorClient, respondRequestSchema, type GuardReply, type RespondRequest } from 'pending-projector-client';
import { newestDurableTurnId, type PendingAction } from 'pending-projector-client/turns';

const request: RespondRequest = { pending_id: 'p1', reject: { reason: 'not now' } };
const parsed = respondRequestSchema.safeParse(request);
export const pendingId: string | undefined = parsed.success ? parsed.data.pending_id : undefined;
// @ts-expect-error a pending id is a string: the request types are real, not any
export const wrong: RespondRequest = { pending_id: 1, answers: [] };
export async function blocked(nc: NatsConnection): Promise<boolean> {
  const reply: GuardReply = await createPendingProjectorClient(nc).guard({ session_id: 's1' });
  return reply.blocked;
}
export const current: string | null | undefined = newestDurableTurnId([]);
export const action: PendingAction = 'clarification';
`;

describe('the light client package', () => {
  let dir: string;
  let tarball: string;
  let scratch: string;
  let installLog: string;
  let install: PackedScratch['install'];

  beforeAll(async () => {
    ({ dir, tarball, scratch, install } = await packIntoScratch(PACKAGE_DIR, 'pending-projector-client'));
    // A backend's install on Node 20: the light package, the Node transport and the core at the
    // version the service pins for Node 20 (3.4 wants Node 22). Install scripts run: a package
    // that needs one fails the checks below.
    installLog = await install(['--loglevel=warn', tarball, '@nats-io/transport-node@3.3.1', '@nats-io/nats-core@3.3.1']);
  }, SLOW_MS);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ships the bundles, their declarations and the licences, and nothing of the service', async () => {
    const { stdout } = await run('tar', ['-tzf', tarball], { maxBuffer: 64 * 1024 * 1024 });
    const files = stdout
      .split('\n')
      .filter(Boolean)
      .map((path) => path.replace(/^package\//, ''));
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'LICENSE',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/turns.js',
        'dist/turns.d.ts',
        'dist/THIRD-PARTY-LICENSES.txt',
      ]),
    );
    expect(files.filter((path) => !/^(package\.json|LICENSE|README\.md|dist\/.*)$/.test(path))).toEqual([]);
    expect(await readFile(join(PACKAGE_DIR, 'LICENSE'), 'utf8')).toBe(await readFile(join(ROOT, 'LICENSE'), 'utf8'));

    const installedDir = join(scratch, 'node_modules', 'pending-projector-client');
    const manifest = JSON.parse(await readFile(join(installedDir, 'package.json'), 'utf8')) as {
      exports: Record<string, string | Record<string, string>>;
      license: string;
    };
    expect(manifest.license).toBe('MIT');
    const targets = Object.values(manifest.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)));
    expect(targets.filter((target) => !existsSync(join(installedDir, target)))).toEqual([]);
  });

  it('installs under 5 MB besides @nats-io, with no database driver, native module or build tool, on Node 20', async () => {
    const packages = await installedPackages(join(scratch, 'node_modules'));
    const names = packages.map((p) => p.name);
    expect(names).toContain('pending-projector-client');
    expect(names.filter((name) => FORBIDDEN.test(name))).toEqual([]);
    expect(packages.filter((p) => p.heavy.length > 0).map((p) => `${p.name}: ${p.heavy.join(', ')}`)).toEqual([]);
    expect(names).not.toContain('zod');
    // One core: the peer is the transport's own copy.
    expect(packages.filter((p) => p.name === '@nats-io/nats-core').map((p) => p.version)).toEqual(['3.3.1']);
    expect(installLog).not.toMatch(/EBADENGINE|ERESOLVE/);

    const besidesNats = packages.filter((p) => !p.name.startsWith('@nats-io/'));
    const bytes = besidesNats.reduce((sum, p) => sum + p.bytes, 0);
    const natsBytes = packages.filter((p) => p.name.startsWith('@nats-io/')).reduce((sum, p) => sum + p.bytes, 0);
    console.log(
      `light client install: ${mb(bytes)} besides @nats-io/* (${besidesNats.map((p) => `${p.name}@${p.version} ${mb(p.bytes)}`).join(', ')}); ` +
        `@nats-io/* ${mb(natsBytes)}; ${packages.length} packages in all`,
    );
    expect(bytes).toBeLessThan(SIZE_LIMIT_BYTES);
  });

  it.skipIf(!natsAvailable())(
    'runs in plain Node: the rules, the schemas, and the client against a real worker and against none',
    { timeout: 180_000 },
    async () => {
      const prefix = uniquePrefix('lightclient');
      const unservedPrefix = uniquePrefix('lightclient_none');
      let worker: WorkerProcess | undefined;
      const nc = await connectTestNats();
      try {
        worker = await spawnWorker(
          { DATABASE_URL: `sqlite:${join(dir, 'worker.db')}`, NATS_URL: natsUrl(), SUBJECT_PREFIX: prefix, BOOT_RECONCILE: 'false' },
          { timeoutMs: 60_000 },
        );
        await writeFile(join(scratch, 'consumer.mjs'), CONSUMER_SCRIPT);
        const consume = async () => {
          const { stdout } = await run(process.execPath, ['consumer.mjs'], {
            cwd: scratch,
            env: {
              ...process.env,
              NATS_URL: natsUrl(),
              PREFIX: prefix,
              UNSERVED_PREFIX: unservedPrefix,
              FIXTURE: join(ROOT, 'testdata', 'current_turn_resolution.json'),
            },
          });
          return JSON.parse(stdout.trim()) as Record<string, unknown>;
        };
        const expected = {
          sameRules: true,
          fixtureMismatches: [],
          validRequest: true,
          invalidRequest: false,
          replyCodes: ['bad_request', 'not_found', 'conflict', 'retryable', 'unavailable', 'internal'],
          serviceSubject: 'acme.pending_projector.v1.summary.get',
          summary: { ok: false, error: { code: 'not_found' } },
          unservedSummary: { ok: false, error: { code: 'unavailable', message: expect.stringContaining('no pending-projector worker serves') } },
          unservedGuard: { ok: false, blocked: true, error: { code: 'unavailable' } },
          nativeAddons: [],
        };
        const result = await consume();
        expect(result).toMatchObject(expected);
        expect(result.fixtureCases).toBeGreaterThan(0);

        // The peer's newest core beside a transport pinned to an older one: two copies of the core,
        // whose error classes differ. The client must still tell "no worker" from other failures.
        await install(['--loglevel=error', '@nats-io/nats-core@3.4.0']);
        const cores = (await installedPackages(join(scratch, 'node_modules'))).filter((p) => p.name === '@nats-io/nats-core').map((p) => p.version);
        expect(cores.sort()).toEqual(['3.3.1', '3.4.0']);
        expect(await consume()).toMatchObject(expected);
      } finally {
        await worker?.stop();
        await deleteTopology(nc, prefix);
        await nc.close();
      }
    },
  );

  it('type-checks a TypeScript consumer that has no zod installed', async () => {
    await writeFile(join(scratch, 'consumer.ts'), TYPED_CONSUMER);
    await writeFile(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          lib: ['ES2022', 'DOM', 'ESNext.Disposable'],
          types: [],
          noEmit: true,
          skipLibCheck: false,
        },
        files: ['consumer.ts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: scratch }).then(
      () => '',
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    expect(checked).toBe('');
  });
});

/** Every package under `nodeModules`, nested ones included, with its size on disk in bytes. */
async function installedPackages(nodeModules: string): Promise<InstalledPackage[]> {
  const found: InstalledPackage[] = [];
  if (!existsSync(nodeModules)) return found;
  for (const entry of await readdir(nodeModules)) {
    if (entry.startsWith('.')) continue;
    const dirs = entry.startsWith('@') ? (await readdir(join(nodeModules, entry))).map((name) => join(nodeModules, entry, name)) : [join(nodeModules, entry)];
    for (const dir of dirs) {
      const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
        bin?: unknown;
        gypfile?: boolean;
        scripts?: Record<string, string>;
      };
      const { bytes, files } = await sizeOf(dir);
      const heavy = [
        ...files.filter((file) => file.endsWith('.node') || file.endsWith('binding.gyp')).map((file) => `contains ${file}`),
        ...['preinstall', 'install', 'postinstall'].filter((script) => manifest.scripts?.[script]).map((script) => `runs a ${script} script`),
        ...(manifest.gypfile ? ['builds with node-gyp'] : []),
        ...(manifest.bin ? ['installs a command'] : []),
      ];
      found.push({ name: manifest.name, version: manifest.version, dir, bytes, heavy });
      found.push(...(await installedPackages(join(dir, 'node_modules'))));
    }
  }
  return found;
}

/** Bytes of every file under `dir`, except a nested node_modules (counted as packages of their own). */
async function sizeOf(dir: string): Promise<{ bytes: number; files: string[] }> {
  let bytes = 0;
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'node_modules') continue;
      const inner = await sizeOf(path);
      bytes += inner.bytes;
      files.push(...inner.files);
    } else if (entry.isFile()) {
      bytes += (await stat(path)).size;
      files.push(path);
    }
  }
  return { bytes, files };
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(2)} MB`;
}
