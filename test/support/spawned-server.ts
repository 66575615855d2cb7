import { ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { scrubSecrets } from '#app/logging/secret-masking.js';
import { join } from 'node:path';
import { freePort } from '#app/common/net.js';
import { appEntryArgs, builtEntryArgs, REPO_ROOT } from './app-entry';
import { recordSecret, recordSecretSettings, SpawnedServerLog } from './test-logs';
import { waitFor } from './wait-for';

export { REPO_ROOT };

/** Environment for a child process: ours, minus test-runner internals, plus `env`; `undefined` unsets. */
function childEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const merged: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete merged.NODE_TEST_CONTEXT;
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete merged[key];
  return merged;
}

/**
 * The allocator settings of the container image (`ENV MALLOC_…` of the Dockerfile), for a server
 * that must use memory as the image does.
 */
export function imageAllocatorEnv(): Record<string, string> {
  const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
  return Object.fromEntries([...dockerfile.matchAll(/^ENV (MALLOC_\w+)=(\S+)$/gm)].map((m) => [m[1], m[2]]));
}

/** A port nobody listens on right now (the server does not report a PORT=0 choice back). */
export { freePort };

export interface SpawnedServer {
  url: string;
  pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<number | null>;
  /** Sends `signal` (default SIGTERM) and resolves with the exit code; SIGKILLs after 30 s. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ChildProcess>();
// A test that failed half-way must not leave servers behind.
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Runs the server (`node dist/main.js`, or src/main.ts from source: see app-entry.ts) as a real
 * process on a free loopback port with `env` (on top of this process's environment; pass
 * `DATABASE_URL: undefined` for the embedded database). Does not wait for it: use this for starts
 * that are expected to fail, `spawnServer` otherwise. With `{ build: true }` it runs the build
 * (`node dist/main.js`, built first when stale) even from source: the process the image runs.
 */
export async function launchServer(
  env: Record<string, string | undefined>,
  options: { build?: boolean } = {},
): Promise<SpawnedServer> {
  const port = await freePort();
  recordSecretSettings({ ...process.env, ...env });
  const log = SpawnedServerLog.for(env);
  const child = spawn(process.execPath, options.build ? builtEntryArgs('main') : appEntryArgs('main'), {
    cwd: REPO_ROOT,
    // A process of its own cannot be handed test DNS records: sender authentication stays off unless a
    // test turns it on, so that no test asks the real DNS. SMTP is off unless a test asks for it (a
    // port of its own): parallel servers must not share 2525.
    env: childEnv({
      PORT: String(port),
      ALCARTA_HOST: '127.0.0.1',
      ALCARTA_MAIL_AUTH: 'off',
      ALCARTA_SMTP_PORT: 'off',
      ...env,
      ...log?.env,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += log ? log.stdout(child.pid!, chunk) : chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    log?.stderr(child.pid!, chunk);
    err += chunk;
  });
  const exited = new Promise<number | null>((resolveExit) =>
    child.once('close', (code) => {
      running.delete(child);
      if (log) out += log.end();
      resolveExit(code);
    }),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stdout: () => out,
    stderr: () => err,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (running.has(child)) child.kill(signal);
      const force = setTimeout(() => child.kill('SIGKILL'), 30_000);
      try {
        return await exited;
      } finally {
        clearTimeout(force);
      }
    },
  };
}

/** `launchServer`, then waits until `/health/ready` answers 200; fails with the output if it exits. */
export async function spawnServer(
  env: Record<string, string | undefined>,
  options: { build?: boolean } = {},
): Promise<SpawnedServer> {
  const server = await launchServer(env, options);
  let exitCode: number | null | undefined;
  void server.exited.then((code) => (exitCode = code));
  try {
    await waitFor(
      'the spawned server to be ready',
      async () => {
        if (exitCode !== undefined) return true;
        return (await fetch(`${server.url}/health/ready`)).status === 200;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
  } catch (err) {
    await server.stop('SIGTERM'); // lets an embedded cluster stop with it
    throw new Error(`${(err as Error).message}\n${scrubbed(server.stderr())}`, { cause: err });
  }
  if (exitCode !== undefined) {
    throw new Error(`the server exited with code ${exitCode} during start:\n${scrubbed(server.stderr())}`);
  }
  return server;
}

/** Runs the CLI (`node dist/cli.js …args`, or src/cli.ts from source) to completion. */
export function runCli(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    execFile(
      process.execPath,
      [...appEntryArgs('cli'), ...args],
      { cwd: REPO_ROOT, env: childEnv(env), timeout: 60_000 },
      (error, stdout, stderr) => {
        // What the CLI prints on purpose (a new token's secret) must never reach a server's log.
        for (const secret of secretsIn(stdout)) recordSecret('token secret printed by the CLI', secret);
        resolveRun({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

/** Secrets found in `text` (token secrets are `alc_` + at least 43 base62 characters). */
export function secretsIn(text: string): string[] {
  return text.match(/alc_[0-9A-Za-z]{43,}/g) ?? [];
}

/** Process output for failure messages, without secrets (test output must not print them). */
export function scrubbed(text: string): string {
  return scrubSecrets(text);
}
