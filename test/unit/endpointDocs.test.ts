import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENDPOINT_SPECS } from '../../src/contract/endpoints.js';

const DOC = path.resolve(import.meta.dirname, '../../docs/endpoints.md');

/**
 * The endpoints docs/endpoints.md gives a heading of their own: a `##` or `###` heading made only of
 * endpoint names (`summary.get and task.reproject`). A heading with other words (`The
 * task_plan.comments.changed event`) names something else.
 */
function endpointHeadings(markdown: string): string[] {
  const names: string[] = [];
  for (const [, text] of markdown.matchAll(/^#{2,3} (.+)$/gm)) {
    const parts = text!.replaceAll('`', '').split(/,? and |, /);
    if (parts.every((part) => /^[a-z_]+(\.[a-z_]+)+$/.test(part))) names.push(...parts);
  }
  return names;
}

describe('docs/endpoints.md', () => {
  const headings = endpointHeadings(fs.readFileSync(DOC, 'utf8'));

  it('gives every endpoint of the endpoint table a heading, once', () => {
    const missing = ENDPOINT_SPECS.map((spec) => spec.name).filter((name) => !headings.includes(name));
    expect(missing).toEqual([]);
    expect(headings.filter((name, i) => headings.indexOf(name) !== i)).toEqual([]);
  });

  it('names no endpoint in a heading that the endpoint table lacks', () => {
    const known = new Set<string>(ENDPOINT_SPECS.map((spec) => spec.name));
    expect(headings.filter((name) => !known.has(name))).toEqual([]);
  });

  it('reads a heading of several endpoints, and leaves a heading with other words out', () => {
    expect(endpointHeadings('## summary.get and task.reproject\n### The `task_plan.comments.changed` event\n### plan.delete\n# a.b\n')).toEqual([
      'summary.get',
      'task.reproject',
      'plan.delete',
    ]);
  });
});
