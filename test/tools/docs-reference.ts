/**
 * `npm run docs:reference`: writes docs/reference/ (tools, settings, REST and its OpenAPI document)
 * from the code. test/unit/reference-docs.test.ts fails while the committed files differ.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { generateReference } from './reference/generate';

async function main(): Promise<void> {
  const root = resolve(__dirname, '..', '..');
  for (const [path, content] of await generateReference(root)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
    process.stdout.write(`wrote ${path}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
