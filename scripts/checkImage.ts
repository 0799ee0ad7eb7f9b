/**
 * `npm run check:image`: the Docker image's build and first run, replayed on this host without a
 * Docker engine. It reads the Dockerfile and plays it in a scratch root folder:
 *
 * - FROM must name the Node major this host runs (the replay uses this host's Node and npm);
 * - WORKDIR, COPY, ENV, USER, VOLUME, ENTRYPOINT and CMD as Docker would, with the image's absolute
 *   paths mapped into the scratch folder (`/app` becomes `<scratch>/app` in RUN commands and ENV
 *   values) and the image's user `node` played by `nobody` (`node:node` in RUN commands too);
 * - every RUN in a network namespace with no interface up (`unshare --net`), and npm offline
 *   (`npm_config_offline=true`) on a scratch copy of this host's npm cache, so the install steps get
 *   nothing but the lock file's packages from the cache: an install script that downloads anything
 *   fails here.
 *
 * Then, as the stand-in user and with the image's ENV, it runs the ENTRYPOINT with `migrate` and
 * `doctor` on the image's default database, and the CMD (the worker) against NATS_URL when one
 * answers, stopped by SIGTERM. It fails if any of them fails, or if the user wrote anywhere in the
 * image but its volumes. `--dockerfile PATH` replays another Dockerfile; `--keep` keeps the folder. It needs root (the namespace and the stand-in user), util-linux's
 * `unshare` and `setpriv`, a warm npm cache (`npm ci` first), and a C++ toolchain and Python for
 * better-sqlite3, as the image has. About three minutes on two cores, most of it the compile.
 */
import { spawn, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { topologyFor, topologyStreams } from '../src/contract/subjects.js';
import { argumentList, envPairs, parseDockerfile } from './dockerfile.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const IMAGE_USER = 'node';
const STAND_IN = { user: 'nobody', group: 'nogroup' };
const keep = process.argv.includes('--keep');
const dockerfileAt = process.argv.indexOf('--dockerfile');
const DOCKERFILE = dockerfileAt > 0 ? resolve(process.argv[dockerfileAt + 1]!) : join(ROOT, 'Dockerfile');

function say(message: string): void {
  process.stdout.write(`check:image: ${message}\n`);
}

function fail(message: string): never {
  process.stderr.write(`check:image: FAILED: ${message}\n`);
  process.exit(1);
}

function run(command: string, args: string[], options: SpawnSyncOptions): number {
  const outcome = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (outcome.error) fail(`${command}: ${outcome.error.message}`);
  return outcome.status ?? 1;
}

if (process.getuid?.() !== 0) fail('needs root: a network namespace for the install steps and a stand-in user for the image user');
for (const tool of ['unshare', 'setpriv']) {
  if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) fail(`${tool} (util-linux) is not on PATH`);
}
const standInUid = Number(spawnSync('id', ['-u', STAND_IN.user], { encoding: 'utf8' }).stdout.trim());
if (!Number.isInteger(standInUid) || standInUid === 0) fail(`no user ${STAND_IN.user} to play the image user`);

const scratch = mkdtempSync(join(tmpdir(), 'pp-image-'));
chmodSync(scratch, 0o755);
process.on('exit', () => {
  if (keep) say(`kept ${scratch}`);
  else rmSync(scratch, { recursive: true, force: true });
});
const inScratch = (imagePath: string) => join(scratch, imagePath);
const workdirs = new Set<string>();

/** The image's absolute paths (those under a WORKDIR root) and its user, as the replay has them. */
function mapped(text: string): string {
  let out = text;
  for (const dir of workdirs) {
    const top = `/${dir.split('/')[1]}`;
    out = out.replace(new RegExp(`(^|[\\s:="'])${top.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=[/\\s"']|$)`, 'g'), `$1${scratch}${top}`);
  }
  return out.replaceAll(`${IMAGE_USER}:${IMAGE_USER}`, `${STAND_IN.user}:${STAND_IN.group}`);
}

let workdir = '/';
let user = 'root';
const env: Record<string, string> = {};
const volumes: string[] = [];
let entrypoint: string[] = [];
let cmd: string[] = [];
const baseEnv = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' };

// The build's own home and npm cache, seeded from this host's cache: what the RUN steps do to them
// (`npm cache clean` in the image) stays in the scratch folder. Cache content is immutable and
// named by its hash, so it is hard-linked; the index, which npm appends to, is copied.
const buildHome = inScratch('root');
const hostCache = join(process.env.npm_config_cache ?? join(process.env.HOME ?? '/root', '.npm'), '_cacache');
mkdirSync(join(buildHome, '.npm', '_cacache'), { recursive: true });
if (existsSync(join(hostCache, 'content-v2'))) {
  const linked = spawnSync('cp', ['-al', join(hostCache, 'content-v2'), join(buildHome, '.npm', '_cacache')]).status === 0;
  if (!linked) cpSync(join(hostCache, 'content-v2'), join(buildHome, '.npm', '_cacache', 'content-v2'), { recursive: true });
}
if (existsSync(join(hostCache, 'index-v5'))) cpSync(join(hostCache, 'index-v5'), join(buildHome, '.npm', '_cacache', 'index-v5'), { recursive: true });
const buildEnv = { ...baseEnv, HOME: buildHome, npm_config_cache: join(buildHome, '.npm'), npm_config_offline: 'true' };
/** `words` as the image's current user, inside a network namespace of its own unless `network`. */
function asImageUser(words: string[], options: { network: boolean }): [string, string[]] {
  const asUser = user === 'root' ? words : ['setpriv', '--reuid', STAND_IN.user, '--regid', STAND_IN.group, '--clear-groups', ...words];
  return options.network ? [asUser[0]!, asUser.slice(1)] : ['unshare', ['--net', ...asUser]];
}

const started = performance.now();
for (const instruction of parseDockerfile(readFileSync(DOCKERFILE, 'utf8'))) {
  const where = `Dockerfile:${instruction.line} ${instruction.keyword}`;
  switch (instruction.keyword) {
    case 'FROM': {
      const major = /^node:(\d+)(?:[.-]|$)/.exec(instruction.args)?.[1];
      if (!major) fail(`${where}: the replay knows only the node images, not ${instruction.args}`);
      if (major !== process.versions.node.split('.')[0]) fail(`${where}: the image runs Node ${major}, this host ${process.version}`);
      say(`${where} ${instruction.args}: played by this host's Node ${process.version}`);
      break;
    }
    case 'WORKDIR':
      workdir = resolve(workdir, instruction.args.trim());
      workdirs.add(workdir);
      mkdirSync(inScratch(workdir), { recursive: true });
      break;
    case 'COPY': {
      const words = argumentList(instruction.args);
      if (words.some((word) => word.startsWith('--') && !word.startsWith('--chown='))) fail(`${where}: the replay knows only --chown`);
      const [dest = '', ...sources] = words.filter((word) => !word.startsWith('--')).reverse();
      const target = inScratch(resolve(workdir, dest));
      for (const source of sources.reverse()) {
        const into = dest.endsWith('/') || sources.length > 1 ? join(target, source.split('/').pop()!) : target;
        cpSync(join(ROOT, source), into, { recursive: true });
      }
      break;
    }
    case 'RUN': {
      const command = mapped(instruction.args);
      say(`${where} (as ${user}, no network, npm offline): ${instruction.args}`);
      const stepStarted = performance.now();
      const [bin, args] = asImageUser(['sh', '-c', command], { network: false });
      const status = run(bin, args, { cwd: inScratch(workdir), env: { ...buildEnv, ...env } });
      if (status !== 0) fail(`${where} exited ${status}`);
      say(`  done in ${Math.round((performance.now() - stepStarted) / 1000)} s`);
      break;
    }
    case 'ENV':
      for (const [key, value] of envPairs(instruction.args)) env[key] = mapped(value);
      break;
    case 'USER':
      user = instruction.args.trim() === IMAGE_USER ? STAND_IN.user : instruction.args.trim();
      if (user !== STAND_IN.user && user !== 'root') fail(`${where}: the replay can play only ${IMAGE_USER} and root`);
      break;
    case 'VOLUME':
      volumes.push(...argumentList(instruction.args).map((path) => inScratch(resolve(workdir, path))));
      break;
    case 'ENTRYPOINT':
      entrypoint = argumentList(instruction.args);
      break;
    case 'CMD':
      cmd = argumentList(instruction.args);
      break;
    case 'EXPOSE':
    case 'LABEL':
    case 'STOPSIGNAL':
      break;
    default:
      fail(`${where}: not an instruction the replay knows`);
  }
}

if (user !== STAND_IN.user) fail(`the image runs as ${user}, not as ${IMAGE_USER}`);
for (const volume of volumes) {
  if (!existsSync(volume)) fail(`VOLUME ${volume} does not exist in the image`);
  if (statSync(volume).uid !== standInUid) fail(`VOLUME ${volume} is not owned by the image user`);
}
const appDir = inScratch(workdir);
say(
  `install replayed in ${Math.round((performance.now() - started) / 1000)} s; node_modules holds ${readdirSync(join(appDir, 'node_modules')).length} entries`,
);

const runEnv: Record<string, string> = { ...baseEnv, HOME: '/nonexistent', ...env };
for (const command of ['migrate', 'doctor']) {
  say(`${[...entrypoint, command].join(' ')} (as ${IMAGE_USER}, no network, the image's ENV)`);
  const [bin, args] = asImageUser([...entrypoint, command], { network: false });
  const outcome = spawnSync(bin, args, { cwd: appDir, env: runEnv, encoding: 'utf8' });
  const output = `${outcome.stdout}${outcome.stderr}`.trim();
  if (outcome.status !== 0) fail(`${command} on the image's default database exited ${outcome.status}:\n${output}`);
  say(`  ${output.split('\n').pop()}`);
}
const databaseUrl = runEnv.DATABASE_URL;
if (databaseUrl?.startsWith('sqlite:')) {
  const file = resolve(appDir, databaseUrl.slice('sqlite:'.length));
  if (!existsSync(file)) fail(`migrate left no database at ${file}`);
  if (!volumes.some((volume) => dirname(file) === volume || file.startsWith(`${volume}/`))) fail(`the default database ${file} is outside every VOLUME`);
  say(`the default database is ${file.slice(scratch.length)}, in a volume`);
}

async function natsAnswers(url: string): Promise<boolean> {
  const nc = await connect({ servers: url, timeout: 2000 }).catch(() => undefined);
  await nc?.close();
  return nc !== undefined;
}

/** The CMD as the image user against a live NATS, until it is ready; then SIGTERM must exit 0. */
async function runWorker(natsUrl: string): Promise<void> {
  const prefix = `checkimage${process.pid}.`;
  const [bin, args] = asImageUser([...entrypoint, ...cmd], { network: true });
  const child = spawn(bin, args, {
    cwd: appDir,
    env: { ...runEnv, NATS_URL: natsUrl, SUBJECT_PREFIX: prefix, HEALTH_PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  let out = '';
  const ready = await new Promise<boolean>((resolveReady) => {
    const timer = setTimeout(() => resolveReady(false), 120_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('"worker started"')) {
        clearTimeout(timer);
        resolveReady(true);
      }
    });
    void exited.then(() => resolveReady(false));
  });
  if (ready) child.kill('SIGTERM');
  else child.kill('SIGKILL');
  const code = await exited;
  const nc = await connect({ servers: natsUrl });
  const jsm = await jetstreamManager(nc);
  for (const stream of topologyStreams(topologyFor(prefix))) await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
  if (!ready) fail(`the worker did not start:\n${out}`);
  if (code !== 0) fail(`the worker exited ${code} on SIGTERM:\n${out}`);
  say(`${[...entrypoint, ...cmd].join(' ')} (as ${IMAGE_USER}): started on the default database and stopped by SIGTERM with exit 0`);
}

const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
if (await natsAnswers(natsUrl)) await runWorker(natsUrl);
else if (process.env.CI) fail(`no NATS answers at ${natsUrl}, and CI is set: the worker must be run`);
else say(`no NATS answers at ${natsUrl}: the worker itself was not run`);

const strays = spawnSync('find', [scratch, '-uid', String(standInUid)], { encoding: 'utf8' })
  .stdout.split('\n')
  .filter((path) => path && !volumes.some((volume) => path === volume || path.startsWith(`${volume}/`)));
if (strays.length > 0) fail(`the image user wrote outside its volumes: ${strays.join(', ')}`);

say(`PASS in ${Math.round((performance.now() - started) / 1000)} s (the image itself was not built: no Docker engine here)`);
