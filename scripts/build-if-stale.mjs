// `npm start` and `npm run cli`: build only when the build is older than what it is built from.
//
// `npm run build` ends by writing dist/.build-stamp (and starts by deleting dist/, so a failed build
// leaves none). The build is current when the stamp is newer than every file and directory under
// src/ and migrations/ and than the package and TypeScript settings; a directory's time changes when
// a file in it is added, removed or renamed, so deletions count too. Otherwise `npm run build` runs.
//
//   node scripts/build-if-stale.mjs           build if stale
//   node scripts/build-if-stale.mjs --check   only tell: exit 0 when current, 1 (and why) when stale
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

const STAMP = join('dist', '.build-stamp');
const INPUTS = ['src', 'migrations', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

/** The most recently modified path at or under `path`. */
function newest(path) {
  let found = { path, mtimeMs: statSync(path).mtimeMs };
  if (statSync(path).isDirectory()) {
    for (const entry of readdirSync(path)) {
      const candidate = newest(join(path, entry));
      if (candidate.mtimeMs > found.mtimeMs) found = candidate;
    }
  }
  return found;
}

/** Why the build in `root` is stale, or undefined when it is current. */
function staleness(root) {
  const stamp = join(root, STAMP);
  if (!existsSync(stamp)) return 'no complete build yet';
  const builtAt = statSync(stamp).mtimeMs;
  for (const input of INPUTS) {
    const path = join(root, input);
    // The container image has dist/ and no sources: nothing to compare, the build is what it runs.
    if (!existsSync(path)) continue;
    const changed = newest(path);
    if (changed.mtimeMs > builtAt) return `${changed.path.slice(root.length + 1)} changed since the last build`;
  }
  return undefined;
}

const reason = staleness(process.cwd());
if (process.argv.includes('--check')) {
  if (reason) process.stdout.write(`${reason}\n`);
  process.exit(reason ? 1 : 0);
}
if (reason) {
  process.stderr.write(`building (${reason})\n`);
  const build = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit', shell: process.platform === 'win32' });
  process.exit(build.status ?? 1);
}
