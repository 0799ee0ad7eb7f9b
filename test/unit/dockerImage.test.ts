import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { DEFAULT_DATABASE_URL } from '../../src/settingValues.js';
import { SETTINGS } from '../../src/config.js';
import { argumentList, envPairs, parseDockerfile, type Instruction } from '../../scripts/dockerfile.js';

// What the Dockerfile must say for the image to run on its default database and build without an
// install script downloading anything. `npm run check:image` replays it (no Docker engine here);
// these are the facts that need no replay.
const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const instructions = parseDockerfile(read('Dockerfile'));
const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
const lock = JSON.parse(read('package-lock.json')) as {
  packages: Record<string, { dev?: boolean; optional?: boolean; hasInstallScript?: boolean; optionalDependencies?: Record<string, string> }>;
};

const all = (keyword: string) => instructions.filter((i) => i.keyword === keyword);
const last = (keyword: string): Instruction => {
  const found = all(keyword);
  expect(found.length, `no ${keyword} in the Dockerfile`).toBeGreaterThan(0);
  return found[found.length - 1]!;
};
const runs = all('RUN').map((i) => i.args);
const workdir = last('WORKDIR').args.trim();
const env = new Map(all('ENV').flatMap((i) => envPairs(i.args)));
const volumes = all('VOLUME').flatMap((i) => argumentList(i.args).map((path) => posix.resolve(workdir, path)));
const databaseUrl = env.get('DATABASE_URL') ?? DEFAULT_DATABASE_URL;
const databaseFile = posix.resolve(workdir, databaseUrl.replace(/^sqlite:/, ''));
const dataDir = posix.dirname(databaseFile);

describe('the Dockerfile', () => {
  it('builds on the oldest Node the package claims', () => {
    const major = semver.minVersion(pkg.engines.node)!.major;
    expect(last('FROM').args).toMatch(new RegExp(`^node:${major}(?:[.-]|$)`));
  });

  it('installs from the lock file with no install script, and keeps the optional dependencies', () => {
    const install = runs.filter((run) => run.includes('npm ci'));
    expect(install).toHaveLength(1);
    expect(install[0]).toContain('--ignore-scripts');
    expect(install[0]).toContain('--omit=dev');
    expect(install[0]).not.toMatch(/--omit[= ]optional|--no-optional/);
    expect(runs.join('\n')).not.toMatch(/\b(curl|wget|git clone)\b/);
  });

  // Any production package with an install script is either compiled here from source (no download)
  // or has its binary in an optional package the lock file holds.
  it('gives every production package that has an install script what its script would have fetched', () => {
    const scripted = Object.entries(lock.packages)
      .filter(([path, entry]) => path.startsWith('node_modules/') && entry.hasInstallScript && !entry.dev)
      .map(([path]) => path.slice('node_modules/'.length));
    const rebuilt = runs.flatMap((run) =>
      [...run.matchAll(/npm_config_build_from_source=true\b[^&]*\bnpm rebuild ([^&;|]+)/g)].flatMap((m) =>
        m[1]!.split(/\s+/).filter((w) => w && !w.startsWith('-')),
      ),
    );
    expect(scripted.length).toBeGreaterThan(0);
    for (const name of scripted) {
      if (rebuilt.includes(name)) continue;
      const platformBinaries = Object.keys(lock.packages[`node_modules/${name}`]!.optionalDependencies ?? {});
      expect(platformBinaries, `${name} has an install script the image neither replaces nor rebuilds`).toContain('@esbuild/linux-x64');
      expect(lock.packages['node_modules/@esbuild/linux-x64']).toMatchObject({ optional: true });
      expect(lock.packages['node_modules/@esbuild/linux-x64']!.dev).toBeUndefined();
    }
    expect(rebuilt).toContain('better-sqlite3');
  });

  it('copies what the entry point runs: the CLI, the TypeScript sources, the migrations and the tsconfig', () => {
    const copied = all('COPY').flatMap((i) =>
      argumentList(i.args)
        .filter((w) => !w.startsWith('--'))
        .slice(0, -1),
    );
    expect(copied).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'bin', 'src', 'migrations', 'tsconfig.json']));
    expect(argumentList(last('ENTRYPOINT').args)).toEqual(['node', 'bin/pending-projector.js']);
    expect(argumentList(last('CMD').args)).toEqual(['worker']);
  });

  it('keeps the default SQLite database in a volume that the user it runs as owns', () => {
    expect(databaseUrl).toMatch(/^sqlite:/);
    expect(volumes).toContain(dataDir);
    // The code stays root-owned: the worker may write only its data.
    expect(dataDir).not.toBe(workdir);
    const userAt = instructions.indexOf(last('USER'));
    expect(last('USER').args.trim()).toBe('node');
    const owning = instructions.findIndex((i) => i.keyword === 'RUN' && new RegExp(`chown (-R )?node:node ${dataDir}(\\s|$)`).test(i.args));
    expect(owning, `no RUN gives ${dataDir} to node`).toBeGreaterThanOrEqual(0);
    expect(owning).toBeLessThan(userAt);
    expect(instructions.slice(owning + 1).some((i) => i.keyword === 'RUN' && i.args.includes(dataDir))).toBe(false);
  });

  it('lands on the same volume when DATABASE_URL is set back to the service default', () => {
    expect(posix.dirname(posix.resolve(workdir, DEFAULT_DATABASE_URL.replace(/^sqlite:/, '')))).toBe(dataDir);
  });

  it('exposes the default health port', () => {
    expect(argumentList(last('EXPOSE').args)).toContain(String(SETTINGS.healthPort.default));
  });
});

describe('docker-compose.yml', () => {
  const compose = read('docker-compose.yml');
  const worker = compose.slice(compose.indexOf('\n  worker:'));

  it('builds the worker from this Dockerfile and waits for its readiness, not only its start', () => {
    expect(worker).toMatch(/\n {4}build: \.\n/);
    expect(worker).toMatch(/healthcheck:[\s\S]*\/readyz/);
  });

  it("gives the worker its whole shutdown budget before Docker's SIGKILL", () => {
    const grace = /stop_grace_period: (\d+)s/.exec(worker);
    expect(grace, 'no stop_grace_period').not.toBeNull();
    expect(Number(grace![1]) * 1000).toBeGreaterThan(SETTINGS.shutdownTimeoutMs.default);
  });
});
