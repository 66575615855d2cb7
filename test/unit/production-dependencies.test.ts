import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(__dirname, '..', '..');

/**
 * The container image installs production dependencies only (`npm ci --omit=dev`): every package
 * the built server and CLI load must be a production dependency, or `node dist/main.js` dies there.
 */
describe('production dependencies', () => {
  it('every package required by dist/ is in "dependencies"', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
    const missing = new Set<string>();
    const dist = join(ROOT, 'dist');
    for (const file of readdirSync(dist, { recursive: true }) as string[]) {
      if (!file.endsWith('.js')) continue;
      const source = readFileSync(join(dist, file), 'utf8');
      for (const [, specifier] of source.matchAll(/require\("([^".][^"]*)"\)|import\("([^".][^"]*)"\)/g)) {
        if (!specifier || builtins.has(specifier)) continue;
        const parts = specifier.split('/');
        const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
        if (!(name in pkg.dependencies)) missing.add(`${name} (${file})`);
      }
    }
    assert.deepEqual([...missing], []);
  });

  it('dist/ holds no development tools: the local cluster and nginx helpers live in test/tools', () => {
    const files = readdirSync(join(ROOT, 'dist'), { recursive: true }) as string[];
    assert.deepEqual(
      files.filter((file) => /(^|\/)(devtools|local-cluster|nginx)(\/|\.)/.test(file)),
      [],
    );
  });
});
