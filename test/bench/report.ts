import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedPostgres } from '#app/database/embedded-postgres.js';

/** One row of a benchmark table (docs/benchmarks.md): measurement, setup, result, target. */
export type BenchRow = [string, string, string, string];

/** Prints the rows as the Markdown table docs/benchmarks.md keeps, under a dated title. */
export function printTable(title: string, rows: readonly BenchRow[]): void {
  const table = [
    '| measurement | setup | result | target |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
  process.stdout.write(`\n${title} (${new Date().toISOString().slice(0, 10)}, node ${process.version})\n\n${table}\n`);
}

/** Runs a benchmark's main and exits: 0 when it finished, 1 with the stack when it failed. */
export function runBenchmark(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}

/**
 * Makes DATABASE_URL name a PostgreSQL server: the one it names already, else a throwaway embedded
 * cluster. Returns what releases it (nothing to do for an external server).
 */
export async function databaseServer(): Promise<() => Promise<void>> {
  if (process.env.DATABASE_URL) return () => Promise.resolve();
  const dir = await mkdtemp(join(tmpdir(), 'alcarta-bench-pg-'));
  await chmod(dir, 0o755);
  const embedded = await openEmbeddedPostgres(join(dir, 'cluster'), { persistent: false });
  process.env.DATABASE_URL = embedded.url;
  return async () => {
    await embedded.close();
    await rm(dir, { recursive: true, force: true });
  };
}

/** The p-th percentile of ascending `sorted` samples (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** A count as the tables print it (10,000). */
export const count = (n: number) => n.toLocaleString('en-US');
