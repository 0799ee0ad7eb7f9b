// The import rules that keep the architecture readable (see the README's layout paragraph):
// dependencies point one way, SQL stays behind the repository's ports, and only src/bin/ wires.
// Tests, benchmarks and scripts wire real parts together on purpose, so only src/ is checked.
import tseslint from 'typescript-eslint';

/** Matches a relative import that reaches one of the given top-level folders of src/. */
const into = (...folders) => `^(\\.\\./)+(${folders.join('|')})(/|$)`;

const restrict = (...patterns) => ['error', { patterns }];

const rule = (regex, message, extra = {}) => ({ regex, message, ...extra });

const NOT_BIN = rule(into('bin'), 'Only src/bin/ wires parts together; nothing imports it.');

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
    files: ['src/projectors/**/*.ts', 'src/services/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(
        rule(into('repository'), 'Projectors and services depend on the repository\'s store interfaces: import its types only; src/bin/ passes the implementations in.', { allowTypeImports: true }),
        NOT_BIN,
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
    files: ['src/*.ts', 'src/client/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrict(rule('^\\./bin/|^\\.\\./bin/', 'Only src/bin/ wires parts together; nothing imports it.')),
    },
  },
);
