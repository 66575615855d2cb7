import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { CliCommand, isReadCommand, parseCommandLine, UsageError, USAGE } from './cli/command-line';

/**
 * `npm run cli -- <command>` / `node dist/cli.js <command>`: administration without HTTP. Uses the
 * same database as the server (DATABASE_URL, or the embedded cluster under ALCARTA_DATA_DIR, which
 * it attaches to when the server is running). Logs go to standard error, results to standard output.
 * The command line is checked before anything else is loaded, so a mistake answers at once.
 */
async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (argv[0] === 'help' || argv.includes('--help')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (argv[0] === 'audit') return runAudit(argv.slice(1));
  let command: CliCommand;
  try {
    command = parseCommandLine(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`error: ${err.message}\n\n${USAGE}\n`);
    return 2;
  }
  // Listings need one query, not the application (seconds of module loading): see read-commands.ts.
  if (isReadCommand(command)) {
    const { executeRead } = await import('./cli/read-commands.js');
    return executeRead(command);
  }
  // The application is loaded only for a valid command that changes something.
  const { execute } = await import('./cli/cli-runner.js');
  return execute(command);
}

/** `audit verify [--file F]`, `audit export [--since SEQ] [--output F]` (docs/audit.md). */
async function runAudit(argv: string[]): Promise<number> {
  const [action, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: { file: { type: 'string' }, since: { type: 'string' }, output: { type: 'string' } },
  });
  const since = Number(values.since ?? 0);
  if ((action !== 'verify' && action !== 'export') || !Number.isSafeInteger(since) || since < 0) {
    process.stderr.write(
      `error: usage: audit verify [--file F] | audit export [--since SEQ] [--output F]\n\n${USAGE}\n`,
    );
    return 2;
  }
  const { executeAudit } = await import('./cli/audit-commands.js');
  return executeAudit(
    action === 'verify'
      ? { name: 'audit verify', file: values.file ?? null }
      : { name: 'audit export', since, output: values.output ?? null },
  );
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
