/**
 * `npm test`: runs every compiled test file with Node's test runner against a real PostgreSQL.
 * With DATABASE_URL set, that server is used (each test file creates and drops its own database);
 * without it, a throwaway embedded cluster is started in a temporary directory and removed after.
 *
 *   node dist-test/run-tests.js [substring…]   only the test files whose path contains a substring
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { LocalDatabase, openEmbeddedPostgres } from '#app/database/embedded-postgres.js';

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
    return await new Promise<number>((resolve) =>
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))),
    );
  } finally {
    await embedded?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`test runner failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
