/**
 * The test runner behind `npm test` and the tier scripts (docs/testing.md). It runs the test files
 * with Node's test runner, from the TypeScript sources when it runs from them (the npm scripts:
 * every test process inherits this process's flags, see support/app-entry.ts), or the compiled
 * dist-test/ files when it runs from there.
 *
 * A database is set up only when a selected file is outside unit/: with DATABASE_URL set, that
 * server is used (each test file creates and drops its own database); without it, a throwaway
 * embedded cluster is started in a temporary directory and removed after.
 *
 * Every server the tests start logs everything into a directory of the run (ALCARTA_TEST_LOG_DIR,
 * see support/test-logs.ts); when the tests are done, those logs are scanned for secrets, and a
 * secret found fails the run, naming the file and line (support/log-scan.ts). The directory is
 * removed after a clean scan and kept for inspection otherwise.
 *
 * Skipped tests are summed up at the end; where every system package is required (CI), a skip
 * fails the run (support/skip-summary.ts).
 *
 *   run-tests [--watch] [--tier unit|service|e2e] [substring…]
 *     --tier: only the files of that directory; substrings: only the files whose path (within the
 *     tier) contains one; --watch: run them again whenever a file they load changes.
 */
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { finished } from 'node:stream/promises';
import { LocalDatabase, openEmbeddedPostgres } from '#app/database/embedded-postgres.js';
import { FROM_SOURCE, REPO_ROOT } from './support/app-entry';
import { scanLogDir } from './support/log-scan';
import { SkippedTest, skipVerdict } from './support/skip-summary';
import { TEST_LOG_DIR_VARIABLE } from './support/test-logs';

/** The test files under this directory: test/*.test.ts from source, dist-test/*.test.js compiled. */
async function testFiles(dir: string): Promise<string[]> {
  const suffix = FROM_SOURCE ? '.test.ts' : '.test.js';
  const entries = await readdir(dir, { recursive: true });
  return entries
    .filter((f) => f.endsWith(suffix))
    .map((f) => join(dir, f))
    .sort();
}

async function main(): Promise<number> {
  const { watch, tier, filters } = parseArguments(process.argv.slice(2));
  const inTier = (await testFiles(__dirname)).filter(
    (f) => !tier || relative(__dirname, f).startsWith(`${tier}${sep}`),
  );
  const files = filters.length
    ? inTier.filter((f) => filters.some((s) => relative(join(__dirname, tier ?? ''), f).includes(s)))
    : inTier;
  if (files.length === 0) {
    process.stderr.write(`no test files in ${tier ?? 'any tier'} match ${filters.join(', ') || 'anything'}\n`);
    return 1;
  }

  // The servers that tests spawn from source read the compiler options from the repository's
  // tsconfig.json wherever their working directory is.
  process.env.SWC_NODE_PROJECT ??= join(REPO_ROOT, 'tsconfig.json');
  const needsDatabase = files.some((f) => !relative(__dirname, f).startsWith(`unit${sep}`));
  let embedded: LocalDatabase | undefined;
  let dir: string | undefined;
  if (!needsDatabase) {
    process.stdout.write('test database: none (unit tests only)\n');
  } else if (!process.env.DATABASE_URL) {
    dir = await mkdtemp(join(tmpdir(), 'alcarta-test-pg-'));
    await chmod(dir, 0o755); // the postgres OS user must reach it when we run as root
    embedded = await openEmbeddedPostgres(join(dir, 'cluster'), { persistent: false });
    process.env.DATABASE_URL = embedded.url;
    process.stdout.write(`test database: throwaway embedded PostgreSQL in ${dir}\n`);
  } else {
    process.stdout.write(`test database: ${new URL(process.env.DATABASE_URL).host} (DATABASE_URL)\n`);
  }
  const cleanUp = async () => {
    await embedded?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  };

  const ownLogDir = !process.env[TEST_LOG_DIR_VARIABLE];
  const logDir = process.env[TEST_LOG_DIR_VARIABLE] || (await mkdtemp(join(tmpdir(), 'alcarta-test-logs-')));
  process.env[TEST_LOG_DIR_VARIABLE] = logDir;
  if (watch) {
    // A watched run ends with Ctrl-C: the database goes with it.
    process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));
  }

  try {
    const { failed, skipped } = await runFiles(files, watch);
    const verdict = skipVerdict(skipped, __dirname);
    if (verdict.lines.length) process.stdout.write(`\n${verdict.lines.join('\n')}\n`);
    const clean = await scanLogs(logDir);
    if (clean && ownLogDir) await rm(logDir, { recursive: true, force: true });
    return failed || verdict.fails || !clean ? 1 : 0;
  } finally {
    await cleanUp();
  }
}

/**
 * `[--watch] [--tier DIR] [substring…]`. Watching every tier would restart servers on every save:
 * a watch without a tier or substring watches the unit tier.
 */
function parseArguments(args: string[]): { watch: boolean; tier: string | undefined; filters: string[] } {
  const watch = args.includes('--watch');
  const tierAt = args.indexOf('--tier');
  const tier = tierAt >= 0 ? args[tierAt + 1] : undefined;
  const filters = args.filter((a, i) => a !== '--watch' && (tierAt < 0 || (i !== tierAt && i !== tierAt + 1)));
  if (watch && !tier && filters.length === 0) return { watch, tier: 'unit', filters };
  return { watch, tier, filters };
}

/** Runs `files` with the spec reporter on stdout; what failed and what was skipped. */
async function runFiles(files: string[], watch: boolean): Promise<{ failed: boolean; skipped: SkippedTest[] }> {
  // Three files at a time: most of a test's time is spent waiting on servers, PostgreSQL and
  // spawned processes, so even two cores run three well (the suite on 2 cores: 470 s against 560 s
  // with two). ALCARTA_TEST_CONCURRENCY overrides it.
  const concurrency = Number(process.env.ALCARTA_TEST_CONCURRENCY ?? '3');
  let failed = false;
  const skipped: SkippedTest[] = [];
  const stream = run({ files, concurrency, watch });
  stream.on('test:fail', () => (failed = true));
  stream.on('test:pass', (test) => {
    if (test.skip !== undefined) skipped.push({ file: test.file, name: test.name, reason: test.skip });
  });
  const report = stream.compose(new spec());
  report.pipe(process.stdout, { end: false });
  await finished(report);
  return { failed, skipped };
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
