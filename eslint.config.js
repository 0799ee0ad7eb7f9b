// The import rules that keep the architecture readable (see docs/architecture.md): dependencies
// point one way, SQL stays behind the repository's ports, the database drivers and the NATS client
// are each imported by the one layer that owns them, and only src/bin/ wires. Tests, benchmarks and
// scripts wire real parts together on purpose, so the import rules check only src/; a promise left
// floating is a bug everywhere, so that rule also covers bench/ and scripts/.
import tseslint from 'typescript-eslint';

/** Matches a relative import that reaches one of the given top-level folders of src/. */
const into = (...folders) => `^(\\.\\./)+(${folders.join('|')})(/|$)`;

const restrict = (...patterns) => ['error', { patterns }];

const rule = (regex, message, extra = {}) => ({ regex, message, ...extra });

const NOT_BIN = rule(into('bin'), 'Only src/bin/ wires parts together; nothing imports it.');

const NO_DATABASE_DRIVER = rule(
  '^(knex|pg|better-sqlite3)(/|$)',
  'Only src/repository/ uses the database drivers (knex, pg, better-sqlite3): the other layers see its ports.',
);

const NO_NATS = rule('^@nats-io/', 'Only the bus adapters (src/events/), the client (src/client/) and src/bin/ use @nats-io: the other layers see ports.');

// typescript-eslint lets a type import through when any pattern that matches it allows types, so
// the context module is left out of this pattern and refused by NO_DATABASE_CONTEXT alone.
const REPOSITORY_TYPES_ONLY = rule(
  '^(\\.\\./)+repository(/(?!context(\\.js)?$)|$)',
  "Projectors and services depend on the repository's store interfaces: import its types only; src/bin/ passes the implementations in.",
  { allowTypeImports: true },
);

const NO_DATABASE_CONTEXT = rule(
  '^(\\.\\./)+repository/context(\\.js)?$',
  'Projectors and services see stores and ports, never the database context a transaction runs in (not even its type): src/bin/ binds stores to it.',
);

/** One block per folder: its own rules plus the packages it may not import (a later block replaces an earlier one's list). */
const folder = (files, ...patterns) => ({ files, rules: { '@typescript-eslint/no-restricted-imports': restrict(...patterns) } });

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  {
    files: ['src/**/*.ts'],
    languageOptions: { parser: tseslint.parser },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      'no-console': 'error',
    },
  },
  {
    files: ['src/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
    },
  },
  // Any folder of src/ not named below (and a new one until it is): neither driver nor NATS.
  folder(['src/**/*.ts'], NOT_BIN, NO_DATABASE_DRIVER, NO_NATS),
  folder(['src/*.ts'], rule('^\\./bin/', 'Only src/bin/ wires parts together; nothing imports it.'), NO_DATABASE_DRIVER, NO_NATS),
  folder(
    ['src/config.ts', 'src/settingValues.ts'],
    rule('^\\./bin/', 'Only src/bin/ wires parts together; nothing imports it.'),
    rule(
      '^\\./repository/',
      'config.ts imports nothing of src/repository/ (the repository acts on the configuration, not the other way): values both read live in src/settingValues.ts.',
    ),
    NO_DATABASE_DRIVER,
    NO_NATS,
  ),
  folder(
    ['src/index.ts'],
    rule(
      '^\\./(?!client/|contract/|turns/)',
      "The package's main entry publishes the client surface: it imports only src/client/, src/contract/ and src/turns/.",
    ),
    NO_DATABASE_DRIVER,
    NO_NATS,
  ),
  folder(
    ['src/repository/**/*.ts'],
    rule(
      into('events', 'projectors', 'services', 'bin', 'client'),
      'src/repository/ knows nothing of the bus, the projectors or the services: they depend on it, through its ports.',
    ),
    NO_NATS,
  ),
  folder(
    ['src/events/**/*.ts'],
    rule(into('repository'), 'The NATS adapters know nothing of the database: take what they need from src/timestamps.ts or a port.'),
    rule(into('projectors', 'services'), "The bus adapters implement the projectors' and services' ports: import their types only.", {
      allowTypeImports: true,
    }),
    NOT_BIN,
    NO_DATABASE_DRIVER,
  ),
  folder(['src/projectors/**/*.ts'], NO_DATABASE_CONTEXT, REPOSITORY_TYPES_ONLY, NOT_BIN, NO_DATABASE_DRIVER, NO_NATS),
  folder(
    ['src/services/**/*.ts'],
    NO_DATABASE_CONTEXT,
    REPOSITORY_TYPES_ONLY,
    NOT_BIN,
    NO_DATABASE_DRIVER,
    rule('^@nats-io/', 'src/services/ returns reply values and does no NATS I/O: the bus adapters in src/events/ serve the endpoints.'),
  ),
  folder(
    ['src/contract/**/*.ts'],
    rule(
      '^\\.\\./(?!turns/|storableText\\.js$|timestamps\\.js$)',
      'src/contract/ is the wire contract the light client ships: it imports nothing of ours but src/turns/ and the dependency-free src/storableText.ts and src/timestamps.ts.',
    ),
    rule('^(?!zod$)[^.]', 'src/contract/ is the wire contract the light client ships: zod is the only package it imports.'),
  ),
  folder(
    ['src/background/**/*.ts'],
    rule(
      '^\\.\\./',
      'src/background/ is the machinery that runs work (coalescing, periodic runs, backoff) for the projectors, the services and src/bin/: it imports nothing of ours outside itself.',
    ),
    NO_DATABASE_DRIVER,
    NO_NATS,
  ),
  folder(
    ['src/turns/**/*.ts'],
    rule('^\\.\\./', 'src/turns/ is dependency-free (shared with UI clients): it imports nothing of ours outside itself.'),
    NO_DATABASE_DRIVER,
    NO_NATS,
  ),
  folder(
    ['src/client/**/*.ts'],
    rule('^\\.\\./(?!contract/|turns/)', 'The typed client imports only the wire contract (src/contract/) and the turn rules (src/turns/).'),
    NO_DATABASE_DRIVER,
  ),
  // The console page runs in a browser: the browser's NATS client, the typed client, the contract
  // and the turn rules, nothing that needs Node or a server's layers.
  folder(
    ['src/console/**/*.ts'],
    rule(
      '^\\.\\./(?!client/|contract/|turns/)',
      'src/console/ is browser code: of ours it imports only src/client/, src/contract/ and src/turns/ (no repository/, services/, events/ or bin/).',
    ),
    rule(
      '^(?!@nats-io/(nats-core|kv|jetstream)$|zod$)[^.]',
      'src/console/ is browser code: its packages are @nats-io/nats-core, @nats-io/kv, @nats-io/jetstream (and zod, through the client).',
    ),
  ),
  folder(['src/bin/**/*.ts'], NO_DATABASE_DRIVER),
);
