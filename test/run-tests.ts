/**
 * `npm test`: runs every compiled test file with Node's test runner against a real PostgreSQL.
 * With DATABASE_URL set, that server is used (each test file creates and drops its own database);
 * without it, a throwaway embedded cluster is started in a temporary directory and removed after.
 *
 * Every server the tests start logs everything into a directory of the run (ALCARTA_TEST_LOG_DIR,
 * see support/test-logs.ts); when the tests are done, those logs are scanned for secrets, and a
 * secret found fails the run, naming the file and line (support/log-scan.ts). The directory is
 * removed after a clean scan and kept for inspection otherwise.
 *
 *   node dist-test/run-tests.js [substring…]   only the test files whose path contains a substring
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { LocalDatabase, openEmbeddedPostgres } from '#app/database/embedded-postgres.js';
import { scanLogDir } from './support/log-scan';
import { TEST_LOG_DIR_VARIABLE } from './support/test-logs';

async function testFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true });
  return entries
    .filter((f) => f.endsWith('.test.js'))
    .map((f) => join(dir, f))
    .sort();
}

async function main(): Promise<number> {
  const filters = process.argv.slice(2);
  const all = await testFiles(__dirname);
  const files = filters.length ? all.filter((f) => filters.some((s) => relative(__dirname, f).includes(s))) : all;
  if (files.length === 0) {
    process.stderr.write(`no test files match ${filters.join(', ')}\n`);
    return 1;
  }

  let embedded: LocalDatabase | undefined;
  let dir: string | undefined;
  const env = { ...process.env };
  if (!env.DATABASE_URL) {
    dir = await mkdtemp(join(tmpdir(), 'alcarta-test-pg-'));
    await chmod(dir, 0o755); // the postgres OS user must reach it when we run as root
    embedded = await openEmbeddedPostgres(join(dir, 'cluster'), { persistent: false });
    env.DATABASE_URL = embedded.url;
    process.stdout.write(`test database: throwaway embedded PostgreSQL in ${dir}\n`);
  } else {
    process.stdout.write(`test database: ${new URL(env.DATABASE_URL).host} (DATABASE_URL)\n`);
  }

  const ownLogDir = !env[TEST_LOG_DIR_VARIABLE];
  const logDir = env[TEST_LOG_DIR_VARIABLE] || (await mkdtemp(join(tmpdir(), 'alcarta-test-logs-')));
  env[TEST_LOG_DIR_VARIABLE] = logDir;

  try {
    // Three files at a time: most of a test's time is spent waiting on servers, PostgreSQL and
    // spawned processes, so even two cores run three well (the suite on 2 cores: 470 s against 560 s
    // with two). ALCARTA_TEST_CONCURRENCY overrides it.
    const concurrency = env.ALCARTA_TEST_CONCURRENCY ?? '3';
    const child = spawn(
      process.execPath,
      ['--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files],
      { stdio: 'inherit', env },
    );
    const code = await new Promise<number>((resolve) =>
      child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0))),
    );
    const clean = await scanLogs(logDir);
    if (clean && ownLogDir) await rm(logDir, { recursive: true, force: true });
    return clean ? code : code || 1;
  } finally {
    await embedded?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}

/** Scans the run's logs for secrets and reports; true when none was found. */
async function scanLogs(dir: string): Promise<boolean> {
  const started = Date.now();
  const report = await scanLogDir(dir);
  const size = `${(report.bytes / 1024 / 1024).toFixed(1)} MiB`;
  const took = `${((Date.now() - started) / 1000).toFixed(1)} s`;
  if (report.findings.length === 0) {
    process.stdout.write(
      `log scan: no secret in ${report.files} log files (${size}; ${report.recorded} recorded secrets and every shape, ${took})\n`,
    );
    return true;
  }
  const shown = report.findings.slice(0, 50);
  process.stderr.write(
    [
      `log scan: secrets in ${report.findings.length} lines of the servers' logs of this run (${dir} is kept):`,
      ...shown.map((f) => `  ${f.file}:${f.line}: ${f.kinds.join('; ')}\n      ${f.excerpt}`),
      ...(report.findings.length > shown.length ? [`  … and ${report.findings.length - shown.length} more`] : []),
      '',
    ].join('\n'),
  );
  return false;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`test runner failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
