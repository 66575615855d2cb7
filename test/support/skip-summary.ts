import { relative } from 'node:path';
import { systemPackagesRequired } from './system-packages';

/** A test or suite that the run skipped, as the test runner reported it. */
export interface SkippedTest {
  file: string | undefined;
  name: string;
  /** The reason given to `skip` (true when none was given). */
  reason: string | boolean;
}

/** What the runner prints after a run that skipped something, and whether the run fails for it. */
export interface SkipVerdict {
  lines: string[];
  fails: boolean;
}

/**
 * The summary of a run's skips, one line per reason with the test files it skipped (relative to
 * `root`). Where every system package is required (CI), any skip fails the run: a suite that skips
 * there would hide whatever it tests, so a skip is never taken for a pass.
 */
export function skipVerdict(
  skipped: readonly SkippedTest[],
  root: string,
  env: NodeJS.ProcessEnv = process.env,
): SkipVerdict {
  if (skipped.length === 0) return { lines: [], fails: false };
  const byReason = new Map<string, Set<string>>();
  for (const test of skipped) {
    const reason = typeof test.reason === 'string' ? test.reason : '(no reason given)';
    const files = byReason.get(reason) ?? new Set<string>();
    files.add(test.file ? relative(root, test.file) : test.name);
    byReason.set(reason, files);
  }
  const fails = systemPackagesRequired(env);
  const lines = [
    `skipped: ${skipped.length} tests or suites${fails ? ', which fails this run (every suite must run in CI)' : ''}`,
    ...[...byReason].map(([reason, files]) => `  ${reason}\n      in ${[...files].sort().join(', ')}`),
  ];
  return { lines, fails };
}
