import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);
const BIG_OUTPUT = { maxBuffer: 64 * 1024 * 1024 };

/** A package packed by `npm pack`, and an empty ESM project beside it to install it into. */
export interface PackedScratch {
  /** The temporary folder holding both; remove it when done. */
  readonly dir: string;
  readonly tarball: string;
  readonly scratch: string;
  /** `npm install` in the scratch project, offline-first and quiet; resolves to what npm printed. */
  install(args: readonly string[]): Promise<string>;
}

/** Packs the package at `packageDir` (exactly one tarball) and makes a scratch project for it. */
export async function packIntoScratch(packageDir: string, label: string): Promise<PackedScratch> {
  const dir = await mkdtemp(join(tmpdir(), `${label}-`));
  await run('npm', ['pack', '--pack-destination', dir, '--silent'], { cwd: packageDir, ...BIG_OUTPUT });
  const packed = (await readdir(dir)).filter((name) => name.endsWith('.tgz'));
  if (packed.length !== 1) throw new Error(`npm pack made ${packed.length} tarballs in ${dir}`);
  const tarball = join(dir, packed[0]!);
  const scratch = join(dir, 'scratch');
  await mkdir(scratch);
  await writeFile(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
  return {
    dir,
    tarball,
    scratch,
    async install(args) {
      const { stdout, stderr } = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...args], { cwd: scratch, ...BIG_OUTPUT });
      return `${stdout}\n${stderr}`;
    },
  };
}
