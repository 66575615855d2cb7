/**
 * The collecting half of the whole-run log scan (log-scan.ts is the other). When the test runner
 * sets ALCARTA_TEST_LOG_DIR, every server a test starts writes its full log, at debug level
 * whatever level the test asked for, as JSON lines into a file there: in-process servers through
 * `serverLogger`, spawned ones through `SpawnedServerLog` (their stdout and stderr as the process
 * wrote them). The test keeps seeing only the lines of the level it asked for. Support code that
 * creates or receives a secret (tokens, bootstrap secrets, link tokens from mail, console cookies,
 * websocket tickets, identity-provider codes) records it with `recordSecret`, and the scan at the
 * end of the run looks for every recorded value in every file.
 *
 * Without the variable (a test file run on its own with `node --test`) nothing is written and
 * servers log as they always did.
 */
import { appendFileSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Writable } from 'node:stream';
import { Logger } from 'pino';
import { createRootLogger } from '#app/logging/logger.js';

export const TEST_LOG_DIR_VARIABLE = 'ALCARTA_TEST_LOG_DIR';
/** Where recorded secrets go, one JSON line each, inside the log directory. */
export const SECRETS_SUBDIR = 'secrets';

const logDir = process.env[TEST_LOG_DIR_VARIABLE] || undefined;
/** Whether this run collects logs and secrets (support code can skip the work of recording otherwise). */
export const recordingSecrets = logDir !== undefined;

/** pino's levels by name; `silent` writes nothing. */
const LEVELS: Record<string, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: Number.POSITIVE_INFINITY,
};

/** The test file this process runs (the runner gives every file a process of its own). */
function testName(): string {
  return basename(process.argv[1] ?? 'test').replace(/\.js$/, '');
}

function openLogFile(name: string): number {
  mkdirSync(logDir!, { recursive: true, mode: 0o700 });
  return openSync(join(logDir!, name), 'a', 0o600);
}

/** Whether a line of a server's output is one the test asked for: pino lines below `level` are not. */
function wanted(line: string, level: number): boolean {
  const label = /^\{"level":"(\w+)"/.exec(line)?.[1];
  return label === undefined ? level !== LEVELS.silent : (LEVELS[label] ?? 0) >= level;
}

let inProcessLog: number | undefined;

/**
 * The logger for a server started in this process (`startServer({ logger })`): everything at debug
 * into this process's log file, scrubbed as in production; lines at `level` and above also on
 * standard output, as the server's own logger would write them. Undefined outside a logged run.
 */
export function serverLogger(level: string): Logger | undefined {
  if (!logDir) return undefined;
  inProcessLog ??= openLogFile(`${testName()}.${process.pid}.log`);
  const file = inProcessLog;
  const threshold = LEVELS[level] ?? LEVELS.info;
  const destination = new Writable({
    decodeStrings: false,
    write(line: string, _encoding, done) {
      // Synchronous, so that nothing is lost when the test process ends.
      writeSync(file, line);
      if (wanted(line, threshold)) process.stdout.write(line);
      done();
    },
  });
  return createRootLogger('debug', destination);
}

/**
 * A spawned server's output in a logged run: the child logs at debug (`env`; at trace if the test
 * asked for it), each stream is copied
 * whole into a file of its own, and `stdout` hands back only the complete lines at the level the
 * test asked for. A level that is not one (a test of configuration errors) is left alone.
 */
export class SpawnedServerLog {
  private stdoutFile: number | undefined;
  private stderrFile: number | undefined;
  private partial = '';

  private constructor(
    private readonly threshold: number,
    readonly env: { ALCARTA_LOG_LEVEL: string },
  ) {}

  /** For a server started with `env` (merged over this process's environment); undefined outside a logged run. */
  static for(env: Record<string, string | undefined>): SpawnedServerLog | undefined {
    const requested = 'ALCARTA_LOG_LEVEL' in env ? env.ALCARTA_LOG_LEVEL : process.env.ALCARTA_LOG_LEVEL;
    const threshold = LEVELS[requested ?? 'info'];
    if (!logDir || threshold === undefined) return undefined;
    return new SpawnedServerLog(threshold, { ALCARTA_LOG_LEVEL: requested === 'trace' ? 'trace' : 'debug' });
  }

  /** Copies a chunk of the child's stdout; returns what the test sees of it. */
  stdout(pid: number, chunk: string): string {
    this.stdoutFile ??= openLogFile(`${testName()}.${process.pid}.spawned-${pid}.log`);
    writeSync(this.stdoutFile, chunk);
    const text = this.partial + chunk;
    const end = text.lastIndexOf('\n') + 1;
    this.partial = text.slice(end);
    return text
      .slice(0, end)
      .split(/(?<=\n)/)
      .filter((line) => wanted(line, this.threshold))
      .join('');
  }

  /** What is left of stdout when the child has exited: a last line without its newline. */
  end(): string {
    const rest = this.partial;
    this.partial = '';
    return rest !== '' && wanted(rest, this.threshold) ? rest : '';
  }

  /** Copies a chunk of the child's stderr (start-up failures, the bootstrap banner, library noise). */
  stderr(pid: number, chunk: string): void {
    this.stderrFile ??= openLogFile(`${testName()}.${process.pid}.spawned-${pid}.stderr.log`);
    writeSync(this.stderrFile, chunk);
  }
}

const recorded = new Set<string>();

/**
 * Records a secret that this test run created or received, so that the scan at the end of the run
 * fails if any log holds it. `kind` names it in the scan's report (the value is never printed).
 */
export function recordSecret(kind: string, value: string | null | undefined): void {
  if (!logDir || !value || recorded.has(value)) return;
  recorded.add(value);
  mkdirSync(join(logDir, SECRETS_SUBDIR), { recursive: true, mode: 0o700 });
  appendFileSync(
    join(logDir, SECRETS_SUBDIR, `${testName()}.${process.pid}.jsonl`),
    `${JSON.stringify({ kind, value, test: testName() })}\n`,
    { mode: 0o600 },
  );
}

/** Records the secret settings of a server's environment (bootstrap token, client secret, passwords in URLs). */
export function recordSecretSettings(env: Record<string, string | undefined>): void {
  recordSecret('bootstrap token', env.ALCARTA_BOOTSTRAP_TOKEN);
  recordSecret('console client secret', env.ALCARTA_CONSOLE_CLIENT_SECRET);
  for (const name of ['DATABASE_URL', 'ALCARTA_SMTP_RELAY_URL']) {
    const url = env[name];
    if (url) recordSecret(`password in ${name}`, decodeURIComponent(new URL(url).password));
  }
}
