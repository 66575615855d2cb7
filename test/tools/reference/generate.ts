import 'reflect-metadata';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { openApiDocument } from './openapi';
import { restReference } from './rest-reference';
import { settingsReference } from './settings-reference';
import { toolsReference } from './tools-reference';

export const REFERENCE_DIR = 'docs/reference';

/**
 * The generated reference: file path (relative to the repository) → content, formatted with the
 * project's Prettier settings so that the committed files pass `npm run lint` as they are.
 */
export async function generateReference(root: string): Promise<Map<string, string>> {
  const openapi = await openApiDocument();
  const files = new Map<string, string>([
    [`${REFERENCE_DIR}/tools.md`, toolsReference()],
    [`${REFERENCE_DIR}/settings.md`, settingsReference(root)],
    [`${REFERENCE_DIR}/rest.md`, restReference(openapi)],
    [`${REFERENCE_DIR}/openapi.json`, JSON.stringify(openapi)],
  ]);
  for (const [path, content] of files) {
    const filepath = join(root, path);
    const options = await prettier.resolveConfig(filepath);
    files.set(path, await prettier.format(content, { ...options, filepath }));
  }
  return files;
}
