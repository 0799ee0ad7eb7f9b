import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The rules of eslint.config.js, checked on code that breaks each of them: a rule whose pattern
// stopped matching would otherwise pass `npm run lint` in silence. The linted files exist only in
// memory, so the type-aware rules see them through the default project instead of tsconfig.json
// (a dozen one-line files: the default project's file limit guards against slow runs on real trees).
const projectService = {
  allowDefaultProject: ['src/x.ts', 'src/*/x.ts', 'src/*/*/x.ts', 'bench/x.ts', 'scripts/x.ts'],
  maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 32,
};
const eslint = new ESLint({ cwd: path.resolve(import.meta.dirname, '../..'), overrideConfig: { languageOptions: { parserOptions: { projectService } } } });

async function problems(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.resolve(import.meta.dirname, '../..', file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe('the import rules', () => {
  it.each([
    ['src/repository/x.ts', "import { ensureTopology } from '../events/natsTopology.js';"],
    ['src/repository/driver/x.ts', "import { Projector } from '../../projectors/projector.js';"],
    ['src/repository/x.ts', "import type { ClarificationService } from '../services/clarificationService.js';"],
    ['src/events/x.ts', "import { createRepositoryContext } from '../repository/context.js';"],
    ['src/events/x.ts', "import type { RepositoryContext } from '../repository/context.js';"],
    ['src/projectors/x.ts', "import { getTask } from '../repository/tasks.js';"],
    ['src/services/x.ts', "import { createClarificationStore } from '../repository/clarificationStore.js';"],
    ['src/turns/x.ts', "import { toCanonicalTimestamp } from '../timestamps.js';"],
    ['src/background/x.ts', "import type { Logger } from '../logger.js';"],
    ['src/services/x.ts', "import { startWorker } from '../bin/worker.js';"],
    ['src/x.ts', "import { startWorker } from './bin/worker.js';"],
    ['src/services/prompts/x.ts', "import type { RepositoryContext } from '../../repository/context.js';"],
    ['src/projectors/x.ts', "import type { RepositoryContext } from '../repository/context.js';"],
    ['src/config.ts', "import { DEFAULT_PG_MAX_CONNECTIONS } from './repository/database.js';"],
    ['src/config.ts', "import { startWorker } from './bin/worker.js';"],
    ['src/services/x.ts', "import { headers } from '@nats-io/nats-core';"],
    ['src/contract/x.ts', "import type { ClarificationService } from '../services/clarificationService.js';"],
    ['src/contract/x.ts', "import { ensureTopology } from '../events/natsTopology.js';"],
    ['src/contract/x.ts', "import type { NatsConnection } from '@nats-io/nats-core';"],
    ['src/client/x.ts', "import type { AnyReply } from '../services/planCommentService.js';"],
    ['src/client/x.ts', "import { parseEvent } from '../events/parseEvent.js';"],
    ['src/index.ts', "export { startServiceEndpoints } from './events/serviceEndpoints.js';"],
    ['src/bin/x.ts', "import knexFactory from 'knex';"],
    ['src/projectors/x.ts', "import type { Knex } from 'knex';"],
    ['src/x.ts', "import pg from 'pg';"],
    ['src/events/x.ts', "import Sqlite from 'better-sqlite3';"],
    ['src/services/x.ts', "import { connect } from '@nats-io/transport-node';"],
    ['src/repository/x.ts', "import type { NatsConnection } from '@nats-io/nats-core';"],
    ['src/turns/x.ts', "import { jetstream } from '@nats-io/jetstream';"],
    ['src/contract/x.ts', "import { headers } from '@nats-io/nats-core';"],
    ['src/newFolder/x.ts', "import { Kvm } from '@nats-io/kv';"],
    ['src/console/x.ts', "import { startServiceEndpoints } from '../events/serviceEndpoints.js';"],
    ['src/console/x.ts', "import type { TaskStore } from '../repository/tasks/taskStore.js';"],
    ['src/console/x.ts', "import { runConsoleCommand } from '../bin/consoleCommand.js';"],
    ['src/console/x.ts', "import { connect } from '@nats-io/transport-node';"],
    ['src/console/x.ts', "import { readFile } from 'node:fs/promises';"],
  ])('refuse %s importing: %s', async (file, code) => {
    expect(await problems(file, `${code}\nexport {};\n`)).toEqual([expect.stringMatching(/^@typescript-eslint\/no-restricted-imports: /)]);
  });

  it.each([
    ['src/projectors/x.ts', "import type { ProjectionStore } from '../repository/projectionStore.js';"],
    ['src/services/x.ts', "import { type ClarificationStore } from '../repository/clarificationStore.js';"],
    ['src/events/x.ts', "import type { SummaryPublisher } from '../projectors/ports.js';"],
    ['src/repository/x.ts', "import { isTruthyFlag } from '../turns/lifecycleTurn.js';"],
    ['src/turns/x.ts', "import { isTruthyFlag } from './lifecycleTurn.js';"],
    ['src/background/x.ts', "import { KeyedCoalescer } from './keyedCoalescer.js';"],
    ['src/bin/x.ts', "import { createProjectionStore } from '../repository/projectionStore.js';"],
    ['src/contract/x.ts', "import { PLAN_COMMENT_LIMITS } from '../turns/planCommentPrompt.js';"],
    ['src/contract/x.ts', "import { idSchema } from '../storableText.js';"],
    ['src/contract/x.ts', "import { z } from 'zod';"],
    ['src/client/x.ts', "import { ENDPOINT_TABLE } from '../contract/endpoints.js';"],
    ['src/client/x.ts', "import type { NatsConnection } from '@nats-io/nats-core';"],
    ['src/index.ts', "export * from './client/index.js';"],
    ['src/events/x.ts', "import { serveEndpoint } from './serveEndpoint.js';"],
    ['src/repository/x.ts', "import knexFactory, { type Knex } from 'knex';"],
    ['src/repository/driver/x.ts', "import Sqlite from 'better-sqlite3';"],
    ['src/events/x.ts', "import { jetstream } from '@nats-io/jetstream';"],
    ['src/client/x.ts', "import { headers } from '@nats-io/nats-core';"],
    ['src/bin/x.ts', "import { connect } from '@nats-io/transport-node';"],
    ['src/console/x.ts', "import { wsconnect } from '@nats-io/nats-core';"],
    ['src/console/x.ts', "import { Kvm } from '@nats-io/kv';"],
    ['src/console/x.ts', "import { createPendingProjectorClient } from '../client/index.js';"],
    ['src/console/x.ts', "import { sessionToOpen } from '../turns/index.js';"],
    ['src/console/x.ts', "import { h } from './dom.js';"],
  ])('allow %s importing: %s', async (file, code) => {
    expect(await problems(file, `${code}\nexport {};\n`)).toEqual([]);
  });
});

describe('promises', () => {
  it.each(['src/projectors/x.ts', 'bench/x.ts', 'scripts/x.ts'])('refuse a promise left floating in %s', async (file) => {
    expect(await problems(file, 'async function flush(): Promise<void> {}\nflush();\nexport {};\n')).toEqual([
      expect.stringMatching(/^@typescript-eslint\/no-floating-promises: /),
    ]);
  });

  it('allow a promise marked as fire-and-forget with void', async () => {
    expect(await problems('src/projectors/x.ts', 'async function flush(): Promise<void> {}\nvoid flush();\nexport {};\n')).toEqual([]);
  });
});
