import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

const SCRIPT = join(process.cwd(), 'scripts', 'build-if-stale.mjs');

/**
 * `npm start` rebuilds only a stale build (scripts/build-if-stale.mjs): here its verdict on a tree of
 * our own, with file times set explicitly instead of waiting for the clock.
 */
describe('build freshness check of npm start', () => {
  const root = mkdtempSync(join(tmpdir(), 'alcarta-freshness-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  /** The script's verdict in `root`: undefined when current, else why it is stale. */
  const verdict = (): string | undefined => {
    try {
      execFileSync(process.execPath, [SCRIPT, '--check'], { cwd: root, encoding: 'utf8' });
      return undefined;
    } catch (err) {
      const failed = err as { status: number; stdout: string };
      assert.equal(failed.status, 1, failed.stdout);
      return failed.stdout.trim();
    }
  };
  const at = (path: string, seconds: number) => utimesSync(join(root, path), seconds, seconds);
  const BUILT = 2_000_000_000;

  it('is stale without a complete build, current after one, stale again when an input changes', () => {
    for (const dir of ['src/mail', 'migrations', 'dist']) mkdirSync(join(root, dir), { recursive: true });
    for (const file of ['src/mail/a.ts', 'src/b.ts', 'migrations/m.ts', 'package.json', 'package-lock.json']) {
      writeFileSync(join(root, file), '');
    }
    for (const path of ['src/mail/a.ts', 'src/mail', 'src/b.ts', 'src', 'migrations/m.ts', 'migrations']) {
      at(path, BUILT - 10);
    }
    at('package.json', BUILT - 10);
    at('package-lock.json', BUILT - 10);
    assert.equal(verdict(), 'no complete build yet');

    writeFileSync(join(root, 'dist/.build-stamp'), '');
    at('dist/.build-stamp', BUILT);
    assert.equal(verdict(), undefined);

    at('src/mail/a.ts', BUILT + 1);
    assert.equal(verdict(), 'src/mail/a.ts changed since the last build');
    at('src/mail/a.ts', BUILT - 10);
    at('package-lock.json', BUILT + 1);
    assert.equal(verdict(), 'package-lock.json changed since the last build');
    at('package-lock.json', BUILT - 10);
    assert.equal(verdict(), undefined);

    // A deleted source leaves its compiled file in dist/ until a build: the directory's time tells.
    unlinkSync(join(root, 'src/b.ts'));
    at('src', BUILT + 1);
    assert.equal(verdict(), 'src changed since the last build');
  });
});
