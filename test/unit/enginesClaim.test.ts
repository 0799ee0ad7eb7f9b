import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

// The README, the Dockerfile and `engines` claim one Node.js line; every package the lock file
// installs must accept its oldest version, or `npm ci` warns EBADENGINE and the claim is false.
const root = new URL('../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean }>;
};

describe('the Node.js version the package claims', () => {
  const oldest = semver.minVersion(pkg.engines.node)?.version ?? '';

  it('is a range with an oldest version', () => {
    expect(oldest).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('is accepted by every package the lock file installs', () => {
    const refusing = Object.entries(lock.packages)
      .filter(([path]) => path !== '')
      .flatMap(([path, meta]) => {
        const range = Array.isArray(meta.engines) ? undefined : meta.engines?.node;
        return range && !semver.satisfies(oldest, range) ? [`${path} wants node ${range}`] : [];
      });
    expect(refusing).toEqual([]);
  });

  it('is the one the Dockerfile builds on', () => {
    const dockerfile = readFileSync(new URL('Dockerfile', root), 'utf8');
    expect(dockerfile).toMatch(new RegExp(`^FROM node:${semver.major(oldest)}[-.]`, 'm'));
  });
});
