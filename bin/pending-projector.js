#!/usr/bin/env node
// Runs the TypeScript CLI through tsx so a fresh clone needs no build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/bin/cli.ts');
