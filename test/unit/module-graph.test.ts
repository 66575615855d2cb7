import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { before, describe, it } from 'node:test';
import ts from 'typescript';

const ROOT = resolve(__dirname, '..', '..');
const SRC = join(ROOT, 'src');
const MAX_LINES = 600;
/** Where the files directly in src/ (main.ts, server.ts…) sit in the graph. */
const TOP = '(top level)';

interface RankTable {
  SRC_RANKS: Readonly<Record<string, number>>;
  TOP_LEVEL_FILES: readonly string[];
}

function filesUnder(dir: string, extensions: readonly string[]): string[] {
  return (readdirSync(dir, { recursive: true }) as string[])
    .map((file) => join(dir, file))
    .filter((file) => extensions.some((ext) => file.endsWith(ext)) && statSync(file).isFile());
}

/** The src/ directory a path inside src/ belongs to, or TOP for a file directly in src/. */
function moduleOf(path: string): string {
  const parts = relative(SRC, path).split(sep);
  return parts.length > 1 ? parts[0] : TOP;
}

/** Every import between two directories of src/, with the files that make it. */
function directoryImports(): Map<string, Map<string, string[]>> {
  const graph = new Map<string, Map<string, string[]>>();
  for (const file of filesUnder(SRC, ['.ts'])) {
    const from = moduleOf(file);
    // TypeScript's own reading of the file: imports, re-exports, dynamic import() and require().
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const to = moduleOf(resolve(dirname(file), fileName));
      if (to === from) continue;
      const edges = graph.get(from) ?? new Map<string, string[]>();
      graph.set(from, edges);
      edges.set(to, [...(edges.get(to) ?? []), `${relative(ROOT, file)} imports ${fileName}`]);
    }
  }
  return graph;
}

/** A cycle of the graph as a path that ends where it starts, or undefined. */
function findCycle(graph: Map<string, Map<string, string[]>>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    const onPath = path.indexOf(node);
    if (onPath >= 0) return [...path.slice(onPath), node];
    if (done.has(node)) return undefined;
    path.push(node);
    for (const next of graph.get(node)?.keys() ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    done.add(node);
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

describe('module graph', () => {
  let ranks: RankTable;
  const graph = directoryImports();

  before(async () => {
    // The rank table is an ES module shared with eslint.config.mjs: loaded as one, not compiled in.
    ranks = (await import(join(ROOT, 'eslint.ranks.mjs'))) as RankTable;
  });

  it('has no cycle between the directories of src/', () => {
    const cycle = findCycle(graph);
    const evidence = cycle?.slice(1).map((to, i) => graph.get(cycle[i])!.get(to)![0]);
    assert.equal(cycle, undefined, `module cycle ${cycle?.join(' -> ')}:\n  ${evidence?.join('\n  ')}`);
  });

  it('gives every directory of src/ a rank, and ranks no directory that is gone', () => {
    const directories = readdirSync(SRC, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
    assert.deepEqual(Object.keys(ranks.SRC_RANKS).sort(), directories);
    const topLevel = readdirSync(SRC).filter((name) => name.endsWith('.ts'));
    assert.deepEqual([...ranks.TOP_LEVEL_FILES].sort(), topLevel.sort());
  });

  it('lets each directory import only strictly lower ranks', () => {
    const rankOf = (module: string) => (module === TOP ? Infinity : ranks.SRC_RANKS[module]);
    const upward = [...graph].flatMap(([from, edges]) =>
      [...edges]
        .filter(([to]) => rankOf(to) >= rankOf(from))
        .map(([to, files]) => `${from} (${rankOf(from)}) -> ${to} (${rankOf(to)}): ${files[0]}`),
    );
    assert.deepEqual(upward, []);
  });

  it(`keeps every file of src/ and test/ within ${MAX_LINES} lines`, () => {
    const files = [...filesUnder(SRC, ['.ts', '.js', '.css', '.eta']), ...filesUnder(join(ROOT, 'test'), ['.ts'])];
    const long = files
      .map((file) => ({ file: relative(ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > MAX_LINES)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    assert.deepEqual(long, []);
  });
});
