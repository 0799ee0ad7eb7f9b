// The import rules that keep the architecture readable (see the README's layout paragraph):
// dependencies point one way, SQL stays behind the repository's ports, and only src/bin/ wires.
// Tests, benchmarks and scripts wire real parts together on purpose, so only src/ is checked.
import tseslint from 'typescript-eslint';

/** Matches a relative import that reaches one of the given top-level folders of src/. */
const into = (...folders) => `^(\\.\\./)+(${folders.join('|')})(/|$)`;

const restrict = (...patterns) => ['error', { patterns }];

const rule = (regex, message, extra = {}) => ({ regex, message, ...extra });

const NOT_BIN = rule(into('bin'), 'Only src/bin/ wires parts together; nothing imports it.');

const REPOSITORY_TYPES_ONLY = rule(
  into('repository'),
  'Projectors and services depend on the repository\'s store interfaces: import its types only; src/bin/ passes the implementations in.',
  { allowTypeImports: true },
);

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
    files: ['src/repository/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule(into('events', 'projectors', 'services', 'bin', 'client'), 'src/repository/ knows nothing of the bus, the projectors or the services: they depend on it, through its ports.'),
      ),
    },
  },
  {
    files: ['src/events/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule(into('repository'), 'The NATS adapters know nothing of the database: take what they need from src/timestamps.ts or a port.'),
        rule(into('projectors', 'services'), 'The bus adapters implement the projectors\' and services\' ports: import their types only.', { allowTypeImports: true }),
        NOT_BIN,
      ),
    },
  },
  {
    files: ['src/projectors/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(REPOSITORY_TYPES_ONLY, NOT_BIN),
    },
  },
  {
    files: ['src/services/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        REPOSITORY_TYPES_ONLY,
        NOT_BIN,
        rule('^@nats-io/', 'src/services/ returns reply values and does no NATS I/O: the bus adapters in src/events/ serve the endpoints.'),
      ),
    },
  },
  {
    files: ['src/contract/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule(
          '^\\.\\./(?!turns/|storableText\\.js$|timestamps\\.js$)',
          'src/contract/ is the wire contract the light client ships: it imports nothing of ours but src/turns/ and the dependency-free src/storableText.ts and src/timestamps.ts.',
        ),
        rule('^(?!zod$)[^.]', 'src/contract/ is the wire contract the light client ships: zod is the only package it imports.'),
      ),
    },
  },
  {
    files: ['src/background/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule('^\\.\\./', 'src/background/ is the machinery that runs work (coalescing, periodic runs, backoff) for the projectors, the services and src/bin/: it imports nothing of ours outside itself.'),
      ),
    },
  },
  {
    files: ['src/turns/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(rule('^\\.\\./', 'src/turns/ is dependency-free (shared with UI clients): it imports nothing of ours outside itself.')),
    },
  },
  {
    files: ['src/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(rule('^\\./bin/|^\\.\\./bin/', 'Only src/bin/ wires parts together; nothing imports it.')),
    },
  },
  {
    // Replaces the rule above for these files, so it repeats its bin/ pattern.
    files: ['src/config.ts', 'src/settingValues.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule('^\\./bin/', 'Only src/bin/ wires parts together; nothing imports it.'),
        rule('^\\./repository/', 'config.ts imports nothing of src/repository/ (the repository acts on the configuration, not the other way): values both read live in src/settingValues.ts.'),
      ),
    },
  },
  {
    files: ['src/index.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(rule('^\\./(?!client/|contract/|turns/)', 'The package\'s main entry publishes the client surface: it imports only src/client/, src/contract/ and src/turns/.')),
    },
  },
  {
    files: ['src/client/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule('^\\.\\./(?!contract/|turns/)', 'The typed client imports only the wire contract (src/contract/) and the turn rules (src/turns/).'),
      ),
    },
  },
);
