import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';

/** The repository root (this file runs from test/support/ or, compiled, from dist-test/support/). */
export const REPO_ROOT = resolve(__dirname, '..', '..');

/**
 * Whether this process runs the TypeScript sources (`npm test`: SWC compiles each file as it is
 * loaded, and `#app/*` resolves to src/) rather than the compiled dist-test/ and dist/.
 */
export const FROM_SOURCE = __filename.endsWith('.ts');

/**
 * The Node flags that run TypeScript from source: @swc-node/register compiles each file as it is
 * required (keeping the decorator metadata Nest's injection by type needs, which esbuild-based
 * loaders drop), source-resolution.ts finds the .ts file behind a relative `.js` import, and the
 * `alcarta-source` condition points `#app/*` (package.json "imports") at src/. The same flags as
 * the npm test scripts.
 */
export const SOURCE_NODE_FLAGS: readonly string[] = [
  '--require',
  require.resolve('@swc-node/register'),
  '--require',
  join(__dirname, 'source-resolution.ts'),
  '--conditions=alcarta-source',
];

/**
 * The arguments of `node` that run one of the application's entry points the way this process
 * runs: `src/main.ts` with the source flags from source, else the build's `dist/main.js` (what
 * the image runs).
 */
export function appEntryArgs(entry: 'main' | 'cli'): string[] {
  return FROM_SOURCE
    ? [...SOURCE_NODE_FLAGS, join(REPO_ROOT, 'src', `${entry}.ts`)]
    : [join(REPO_ROOT, 'dist', `${entry}.js`)];
}

let built = false;

/**
 * The arguments of `node` that run the build's entry point as the container image does
 * (`dist/main.js`), building first when the build is stale (scripts/build-if-stale.mjs, as `npm
 * start` does). For a test that measures the process the image runs — its memory — rather than the
 * source runner, whose compiler adds its own.
 */
export function builtEntryArgs(entry: 'main' | 'cli'): string[] {
  if (!built) {
    execFileSync(process.execPath, [join(REPO_ROOT, 'scripts', 'build-if-stale.mjs')], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    built = true;
  }
  return [join(REPO_ROOT, 'dist', `${entry}.js`)];
}
