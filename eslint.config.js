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

const REPOSITORY_TYPES_ONLY = rule(
  into('repository'),
  "Projectors and services depend on the repository's store interfaces: import its types only; src/bin/ passes the implementations in.",
  { allowTypeImports: true },
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
  folder(['src/projectors/**/*.ts', 'src/services/**/*.ts'], REPOSITORY_TYPES_ONLY, NOT_BIN, NO_DATABASE_DRIVER, NO_NATS),
  // Temporary: these two still serve the endpoints on the NATS connection themselves, until that
  // serving moves to a bus adapter; everything else in src/services/ stays free of @nats-io.
  folder(['src/services/endpoint.ts', 'src/services/serviceEndpoints.ts'], REPOSITORY_TYPES_ONLY, NOT_BIN, NO_DATABASE_DRIVER),
  folder(
    ['src/turns/**/*.ts'],
    rule('^\\.\\./', 'src/turns/ is dependency-free (shared with UI clients): it imports nothing of ours outside itself.'),
    NO_DATABASE_DRIVER,
    NO_NATS,
  ),
  folder(['src/client/**/*.ts'], NOT_BIN, NO_DATABASE_DRIVER),
  // The wire contract names what travels on the bus; it may name NATS types, never call NATS.
  folder(['src/contract/**/*.ts'], NOT_BIN, NO_DATABASE_DRIVER, { ...NO_NATS, allowTypeImports: true }),
  folder(['src/bin/**/*.ts'], NO_DATABASE_DRIVER),
);
