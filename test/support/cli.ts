import { execFile } from 'node:child_process';
import { appEntryArgs } from './app-entry';
import { secretsIn } from './spawned-server';
import { recordSecret } from './test-logs';

/** A webhook signing secret (`webhooks create`, `webhooks rotate-secret`): whsec_ and 24 bytes in base64. */
const WEBHOOK_SECRET = /whsec_[A-Za-z0-9+/]{32}/g;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI (`node dist/cli.js …`, or src/cli.ts from source) on `databaseUrl` with otherwise default settings (no ALCARTA_* from outside). */
export function runCli(databaseUrl: string, ...args: string[]): Promise<CliResult> {
  return runCliWith({}, databaseUrl, ...args);
}

/**
 * `runCli` with more environment (`env`, e.g. NODE_OPTIONS) or, with `shell`, the command line
 * handed to /bin/sh as an operator types it (globs expand) in the directory `cwd`.
 */
export function runCliWith(
  options: { env?: Record<string, string>; cwd?: string; shell?: boolean; stdin?: string },
  databaseUrl: string,
  ...args: string[]
): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl };
  for (const key of Object.keys(env)) if (key.startsWith('ALCARTA_')) delete env[key];
  Object.assign(env, options.env);
  const entry = appEntryArgs('cli');
  const [file, argv] = options.shell
    ? ['/bin/sh', ['-c', [process.execPath, ...entry].map((a) => `"${a}"`).join(' ') + ` ${args.join(' ')}`]]
    : [process.execPath, [...entry, ...args]];
  return new Promise((resolve, reject) => {
    const child = execFile(file, argv, { env, cwd: options.cwd, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number')
        return reject(new Error(`cli ${args[0]} did not finish: ${err.message}`));
      // What the CLI prints on purpose (a new token's secret) must never reach a server's log.
      for (const secret of secretsIn(stdout)) recordSecret('token secret printed by the CLI', secret);
      for (const secret of stdout.match(WEBHOOK_SECRET) ?? [])
        recordSecret('webhook secret printed by the CLI', secret);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
    // Without input the CLI's standard input is closed: a `-` file reads nothing rather than waiting.
    child.stdin?.end(options.stdin ?? '');
  });
}
