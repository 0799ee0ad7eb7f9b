// Builds the light client package from the service's own sources (src/client/ and src/turns/ at
// the repository root): no file is copied, so the service and this package cannot drift.
// The run time is one ESM bundle per entry point with zod's used parts inlined (zod alone installs
// at 8 MB), sharing one chunk so both entry points hand out the same functions. The types are
// bundled too, zod's included, so a consumer needs no zod to type-check. The build fails if
// anything but zod and our own sources reaches the bundle, or anything but @nats-io/nats-core
// stays an import: that is the package's promise of no database driver, native module or build tool.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { generateDtsBundle } from 'dts-bundle-generator';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const DIST = join(HERE, 'dist');
const ENTRIES = { index: join(ROOT, 'src/client/index.ts'), turns: join(ROOT, 'src/turns/index.ts') };
const EXTERNAL = ['@nats-io/nats-core'];
const INLINED = ['zod'];

rmSync(DIST, { recursive: true, force: true });
mkdirSync(DIST, { recursive: true });

const result = await build({
  entryPoints: ENTRIES,
  outdir: DIST,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'neutral',
  mainFields: ['module', 'main'],
  target: 'es2022',
  external: EXTERNAL,
  chunkNames: 'chunks/[name]-[hash]',
  legalComments: 'eof',
  metafile: true,
  absWorkingDir: HERE,
  logLevel: 'warning',
});

const problems = [];
const bundledPackages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const path = resolve(HERE, input);
  const pkg = packageOf(path);
  if (pkg) {
    if (INLINED.includes(pkg)) bundledPackages.add(pkg);
    else problems.push(`the bundle inlines ${pkg} (${input}); only ${INLINED.join(', ')} may be inlined`);
  } else if (!path.startsWith(join(ROOT, 'src') + sep)) {
    problems.push(`the bundle reaches ${input}, outside src/`);
  }
}
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  for (const imported of output.imports) {
    if (imported.external && !EXTERNAL.includes(imported.path))
      problems.push(`${file} imports ${imported.path}; only ${EXTERNAL.join(', ')} may stay an import`);
  }
}

// Types: one self-contained declaration file per entry point.
const declarations = generateDtsBundle(
  Object.values(ENTRIES).map((filePath) => ({
    filePath,
    libraries: { inlinedLibraries: INLINED, importedLibraries: EXTERNAL },
    output: { exportReferencedTypes: false, noBanner: true },
  })),
  { preferredConfigPath: join(HERE, 'tsconfig.build.json') },
);
Object.keys(ENTRIES).forEach((name, i) => {
  const text = declarations[i];
  for (const match of text.matchAll(/(?:^|\n)\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/g)) {
    if (!EXTERNAL.includes(match[1])) problems.push(`${name}.d.ts imports ${match[1]}; only ${EXTERNAL.join(', ')} may stay an import`);
  }
  writeFileSync(join(DIST, `${name}.d.ts`), text);
});

if (problems.length > 0) {
  rmSync(DIST, { recursive: true, force: true });
  throw new Error(`the light client package would not be light:\n- ${problems.join('\n- ')}`);
}

// The licence of every inlined package travels with the code it covers.
const notices = [...bundledPackages].sort().map((pkg) => {
  const dir = join(ROOT, 'node_modules', pkg);
  const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  return `${pkg}@${version} (bundled into dist/):\n\n${readFileSync(join(dir, 'LICENSE'), 'utf8').trim()}\n`;
});
writeFileSync(join(DIST, 'THIRD-PARTY-LICENSES.txt'), notices.join('\n'));

/** The npm package a file belongs to, or undefined for a file of ours. */
function packageOf(path) {
  const parts = relative(ROOT, path).split(sep);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return undefined;
  const name = parts[at + 1];
  return name.startsWith('@') ? `${name}/${parts[at + 2]}` : name;
}
