import Module from 'node:module';

/**
 * Loaded with `--require` after @swc-node/register when code runs from source (see app-entry.ts).
 * A relative dynamic `import('./x.js')` in src/ names the file the build emits, as TypeScript's
 * nodenext resolution requires; SWC turns it into `require('./x.js')`, and from source only
 * ./x.ts exists. So a relative `.js` request that finds nothing is resolved as the `.ts` file.
 */
type Resolve = (request: string, parent: unknown, ...rest: unknown[]) => string;
const loader = Module as unknown as { _resolveFilename: Resolve };
const resolveFilename = loader._resolveFilename;

loader._resolveFilename = function resolveSource(request, parent, ...rest) {
  try {
    return resolveFilename.call(this, request, parent, ...rest);
  } catch (err) {
    const relativeJs = request.startsWith('.') && request.endsWith('.js');
    if (!relativeJs || (err as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw err;
    return resolveFilename.call(this, `${request.slice(0, -3)}.ts`, parent, ...rest);
  }
};
