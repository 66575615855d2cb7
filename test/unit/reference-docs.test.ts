import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { generateReference } from '../tools/reference/generate';

const ROOT = resolve(__dirname, '..', '..');

/** docs/reference/ is generated from the code (test/tools/docs-reference.ts): it must say what the code does. */
describe('the generated reference in docs/reference', () => {
  it('is current: regenerating it changes nothing', async () => {
    const generated = await generateReference(ROOT);
    assert.ok(generated.size >= 4);
    for (const [path, content] of generated) {
      const file = join(ROOT, path);
      assert.ok(existsSync(file), `${path} is missing: run npm run docs:reference`);
      assert.ok(
        readFileSync(file, 'utf8') === content,
        `${path} is out of date (the code changed): run npm run docs:reference and commit the result`,
      );
    }
  });
});
