import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, namesOf, type Config, type SettingName, type SettingsOf } from '../config.js';
import { HELP_WIDTH, describeSettings } from '../describeSettings.js';
import { runMigrateCommand } from './migrateCommand.js';
import { runWorkerCommand } from './workerCommand.js';
import { runReconcileCommand, runVerifyCommand } from './reconcileCommands.js';
import { runReplayCommand } from './replayCommand.js';
import { DEFAULT_LIST_LIMIT, runDeadLettersCommand } from './deadLettersCommand.js';
import { runSandboxCommand } from './sandboxCommand.js';
import { runConsoleCommand } from './consoleCommand.js';
import { runSandboxRequest, runSandboxWatch } from './sandboxRequest.js';
import { DEFAULT_SAMPLE_ROWS, parseSampleRows, runDoctorCommand } from './doctorCommand.js';
import { describeFailure } from './commandFailure.js';
import { closestName } from './closestName.js';
import { wrapText } from '../textWrap.js';
import {
  CONSOLE_SETTINGS,
  DEAD_LETTERS_SETTINGS,
  DOCTOR_SETTINGS,
  MIGRATE_SETTINGS,
  RECONCILE_SETTINGS,
  REPLAY_SETTINGS,
  SANDBOX_CLIENT_SETTINGS,
  SANDBOX_SETTINGS,
  VERIFY_SETTINGS,
  WORKER_SETTINGS,
} from './commandSettings.js';

/**
 * `pending-projector <command>`: the only entry point that reads configuration as a whole and
 * creates the database pool, the NATS connection and the root logger.
 */

type Flags = Record<string, string | boolean | undefined>;
type Args = { values: Record<string, unknown>; positionals: string[] };

/** A command as `command()` declares it: its settings list, and a run that takes exactly those settings. */
interface CommandSpec<N extends readonly SettingName[]> {
  summary: string;
  usage: string;
  settings: N;
  options?: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; help: string }>;
  /** Takes positional arguments (`dead-letters show <id>`); any other command refuses them. */
  positionals?: boolean;
  run(config: SettingsOf<N>, args: Args): Promise<number>;
}

interface Command extends Omit<CommandSpec<readonly SettingName[]>, 'run'> {
  /** Loads the command's settings (a ConfigError lists every bad one), ready to run on them. */
  load(flags: Flags, env: NodeJS.ProcessEnv): { logLevel?: Config['logLevel']; run(args: Args): Promise<number> };
}

/** Pairs a command's settings list with its run: what `load` reads is what `run` is typed to take. */
function command<const N extends readonly SettingName[]>(spec: CommandSpec<N>): Command {
  const { run, ...rest } = spec;
  return {
    ...rest,
    load(flags, env) {
      const config = loadConfig(flags, env, spec.settings);
      // A failure's report shows its stack at debug: for a command without LOG_LEVEL, never.
      const { logLevel }: Partial<Config> = config;
      return { logLevel, run: (args) => run(config, args) };
    },
  };
}

const COMMANDS: Record<string, Command> = {
  migrate: command({
    summary: "apply this service's migrations for the schema mode (a second run is a no-op) and report the indexes the queries need that are missing",
    usage: 'pending-projector migrate [--database-url URL] [--schema-mode auto|owned|kandev] [--add-indexes]',
    settings: MIGRATE_SETTINGS,
    options: {
      'add-indexes': {
        type: 'boolean',
        help: 'also build the missing indexes (PostgreSQL: CREATE INDEX CONCURRENTLY), reporting each on stderr; exit 1 if one is still missing after',
      },
    },
    run: (config, args) => runMigrateCommand(config, { addIndexes: Boolean(args.values['add-indexes']) }),
  }),
  doctor: command({
    summary:
      'read the database (never writing) and report whether the worker can run on it: schema mode, columns, indexes, timestamp forms, metadata, open turns (exit 0 ok, 1 warnings, 2 cannot run)',
    usage: 'pending-projector doctor [--database-url URL] [--schema-mode auto|owned|kandev] [--sample N] [--json]',
    settings: DOCTOR_SETTINGS,
    options: {
      sample: { type: 'string', help: `newest rows sampled per timestamp column (default ${DEFAULT_SAMPLE_ROWS})` },
      json: { type: 'boolean', help: 'one JSON document with every finding and the verdict (docs/doctor.md)' },
    },
    run: (config, args) => {
      const sample = parseSampleRows(args.values.sample as string | undefined);
      if (!sample.ok) {
        process.stderr.write(`${sample.message}\n`);
        return Promise.resolve(2);
      }
      return runDoctorCommand(config, { json: Boolean(args.values.json), sampleRows: sample.rows });
    },
  }),
  worker: command({
    summary: 'run the projector: consume events, compare-and-set summaries, publish replacements',
    usage: 'pending-projector worker [flags]',
    settings: WORKER_SETTINGS,
    run: (config) => runWorkerCommand(config),
  }),
  reconcile: command({
    summary: 'repair every task summary (or --task ID ...) from the database, publishing each change',
    usage: 'pending-projector reconcile [--task ID]... [flags]',
    settings: RECONCILE_SETTINGS,
    options: { task: { type: 'string', multiple: true, help: 'only this task (repeatable)' } },
    run: (config, args) => runReconcileCommand(config, (args.values.task as string[] | undefined) ?? []),
  }),
  verify: command({
    summary: 'dry run: list every task whose stored summary differs from a fresh derivation (exit 1 if any)',
    usage: 'pending-projector verify [--task ID]... [--json]',
    settings: VERIFY_SETTINGS,
    options: {
      task: { type: 'string', multiple: true, help: 'only this task (repeatable)' },
      json: { type: 'boolean', help: 'one JSON object per drifted task' },
    },
    run: (config, args) => runVerifyCommand(config, (args.values.task as string[] | undefined) ?? [], Boolean(args.values.json)),
  }),
  replay: command({
    summary: 'reproject every task touched by events in a window of the event stream (ops)',
    usage: 'pending-projector replay (--since <RFC3339 time> | --from-seq <n>) [flags]',
    settings: REPLAY_SETTINGS,
    options: {
      since: { type: 'string', help: 'start at this instant, e.g. 2026-11-30T06:00:00Z' },
      'from-seq': { type: 'string', help: 'start at this stream sequence' },
    },
    run: (config, args) => runReplayCommand(config, { since: args.values.since as string | undefined, fromSeq: args.values['from-seq'] as string | undefined }),
  }),
  'dead-letters': command({
    summary: 'inspect and re-inject dead-lettered events: list | show <id> | retry <id>',
    usage: 'pending-projector dead-letters list [--limit N] | show <id> | retry <id>',
    settings: DEAD_LETTERS_SETTINGS,
    options: { limit: { type: 'string', help: `records to list (default ${DEFAULT_LIST_LIMIT})` } },
    positionals: true,
    run: (config, args) => runDeadLettersCommand(config, args.positionals, Number(args.values.limit ?? DEFAULT_LIST_LIMIT)),
  }),
  console: command({
    summary:
      'serve the web console (tasks, questions, queues, lag, dead letters) and print its URL; the browser connects to NATS over WebSocket (docs/console.md)',
    usage: 'pending-projector console [--console-port N] [--console-nats-url ws://host:port] [--subject-prefix P]',
    settings: CONSOLE_SETTINGS,
    run: (config) => runConsoleCommand(config),
  }),
  sandbox: command({
    summary:
      'try it: a temporary database seeded with a small workspace, the worker on its own subject prefix, and commands to try every endpoint; Ctrl-C removes it all (docs/sandbox.md)',
    usage: 'pending-projector sandbox [flags] (DATABASE_URL unset: a temporary SQLite file; PostgreSQL: a schema of its own)',
    settings: SANDBOX_SETTINGS,
    run: (config) => runSandboxCommand(config),
  }),
  'sandbox request': command({
    summary: "send one request to a worker's endpoint and print the reply (what `nats req` does); exit 0 when it is ok",
    usage: "pending-projector sandbox request <endpoint> '<json body>' --subject-prefix P",
    settings: SANDBOX_CLIENT_SETTINGS,
    positionals: true,
    run: (config, args) => runSandboxRequest(config, args.positionals),
  }),
  'sandbox watch': command({
    summary: 'print every task summary a worker publishes (what `nats sub P.task.status_summary.updated` does)',
    usage: 'pending-projector sandbox watch --subject-prefix P [--json]',
    settings: SANDBOX_CLIENT_SETTINGS,
    options: { json: { type: 'boolean', help: 'print each envelope as published' } },
    run: (config, args) => runSandboxWatch(config, { json: Boolean(args.values.json) }),
  }),
};

/**
 * The first flag of `args` that `options` does not declare (before a `--`), as written; checked
 * before parseArgs, whose own message for it is a paragraph about positionals.
 */
function unknownFlag(args: readonly string[], options: Record<string, { short?: string }>): string | undefined {
  const shorts = new Set(
    Object.values(options)
      .map((o) => o.short)
      .filter(Boolean),
  );
  for (const arg of args) {
    if (arg === '--') return undefined;
    if (arg.startsWith('--')) {
      const flag = arg.slice(2).split('=')[0]!;
      if (!(flag in options)) return `--${flag}`;
    } else if (arg.startsWith('-') && arg.length > 1 && !shorts.has(arg.slice(1))) return arg.split('=')[0];
  }
  return undefined;
}

/** `sandbox request` and `sandbox watch` are commands of their own, with their own settings. */
const SUBCOMMANDS = new Set(['sandbox request', 'sandbox watch']);

function flagOptions(command: Command) {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  for (const name of command.settings) {
    for (const { flag } of namesOf(name)) options[flag] = { type: 'string' };
  }
  for (const [name, o] of Object.entries(command.options ?? {})) options[name] = o.multiple ? { type: o.type, multiple: true } : { type: o.type };
  return options;
}

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => wrapText(c.summary, HELP_WIDTH, ' '.repeat(17), `  ${name.padEnd(14)} `));
  return `Usage: pending-projector <command> [flags]\n\nCommands:\n${lines.join('\n')}\n\nRun 'pending-projector <command> --help' for its flags and environment.\n`;
}

function commandHelp(command: Command): string {
  const own = Object.entries(command.options ?? {}).map(([flag, o]) => `  --${flag}\n${wrapText(o.help, HELP_WIDTH, '      ')}`);
  const usageLine = wrapText(command.usage, HELP_WIDTH, '    ', '');
  return `${usageLine}\n\n${wrapText(command.summary, HELP_WIDTH, '')}\n\nFlags and environment (a flag wins over the environment):\n${[...own, describeSettings(command.settings)].join('\n')}\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [first, ...afterFirst] = argv;
  const sub = `${first} ${afterFirst[0]}`;
  const [name, rest] = SUBCOMMANDS.has(sub) ? [sub, afterFirst.slice(1)] : [first, afterFirst];
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    const closest = closestName(name, Object.keys(COMMANDS));
    process.stderr.write(
      `pending-projector: unknown command ${JSON.stringify(name)}${closest ? `; did you mean ${closest}?` : ''} (see pending-projector --help)\n`,
    );
    return 2;
  }
  const options = flagOptions(command);
  const seeHelp = `(see pending-projector ${name} --help)`;
  const unknown = unknownFlag(rest, options);
  if (unknown !== undefined) {
    const closest = closestName(unknown.replace(/^-+/, ''), Object.keys(options));
    process.stderr.write(`pending-projector: unknown flag ${unknown} for ${name}${closest ? `; did you mean --${closest}?` : ''} ${seeHelp}\n`);
    return 2;
  }
  let args;
  try {
    args = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
  } catch (err) {
    // Node's own words, without its advice about positionals that start with '-'.
    process.stderr.write(`pending-projector: ${(err as Error).message.replace(/\. To specify a positional.*$/s, '')} ${seeHelp}\n`);
    return 2;
  }
  if (!command.positionals && args.positionals.length > 0) {
    process.stderr.write(`pending-projector: ${name} takes no argument ${JSON.stringify(args.positionals[0])} ${seeHelp}\n`);
    return 2;
  }
  if (args.values.help) {
    process.stdout.write(commandHelp(command));
    return 0;
  }
  let loaded;
  try {
    loaded = command.load(args.values as Flags, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`pending-projector: ${err.message}\n${seeHelp}\n`);
      return 2;
    }
    throw err;
  }
  try {
    return await loaded.run(args as Args);
  } catch (err) {
    const { text, exitCode } = describeFailure(err, loaded.logLevel);
    process.stderr.write(text);
    return exitCode;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // Only a bug of main itself gets here: a command's failure is described above.
    const { text, exitCode } = describeFailure(err, undefined);
    process.stderr.write(text);
    process.exitCode = exitCode;
  },
);
