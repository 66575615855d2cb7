import { execFile } from 'node:child_process';
import { appEntryArgs } from './app-entry';
import { secretsIn } from './spawned-server';
import { recordSecret } from './test-logs';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI (`node dist/cli.js …`, or src/cli.ts from source) on `databaseUrl` with otherwise default settings (no ALCARTA_* from outside). */
export function runCli(databaseUrl: string, ...args: string[]): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl };
  for (const key of Object.keys(env)) if (key.startsWith('ALCARTA_')) delete env[key];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...appEntryArgs('cli'), ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number')
        return reject(new Error(`cli ${args[0]} did not finish: ${err.message}`));
      // What the CLI prints on purpose (a new token's secret) must never reach a server's log.
      for (const secret of secretsIn(stdout)) recordSecret('token secret printed by the CLI', secret);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}
