import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** The console page's files, built in memory: served as they are, nothing is written to disk. */
export interface ConsoleAssets {
  html: string;
  script: string;
  css: string;
}

const CONSOLE_DIR = fileURLToPath(new URL('../console/', import.meta.url));

/**
 * Bundles src/console/ for the browser at command start, so the console runs from a clean clone or
 * the packed package (which ships src/) with no build step, and the page is always the tree's.
 */
export async function buildConsoleAssets(): Promise<ConsoleAssets> {
  const result = await build({
    entryPoints: [`${CONSOLE_DIR}main.ts`],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const [html, css] = await Promise.all([readFile(`${CONSOLE_DIR}index.html`, 'utf8'), readFile(`${CONSOLE_DIR}console.css`, 'utf8')]);
  return { html, css, script: result.outputFiles[0]!.text };
}
