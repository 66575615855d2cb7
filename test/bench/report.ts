/** One row of a benchmark's README table: measurement, setup, result, target. */
export type BenchRow = [string, string, string, string];

/** Prints the rows as the Markdown table the README keeps, under a dated title. */
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
