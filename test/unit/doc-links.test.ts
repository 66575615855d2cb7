import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(__dirname, '..', '..');

/** The documentation a clone carries: the front door, the project files beside it, and docs/. */
function documentationFiles(): string[] {
  const docs = (readdirSync(join(ROOT, 'docs'), { recursive: true }) as string[])
    .filter((file) => file.endsWith('.md'))
    .map((file) => join('docs', file));
  return ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'helm/alcarta/README.md', ...docs].sort();
}

/** The code, charts and migrations: their comments cite documents as the docs do. */
function sourceFiles(): string[] {
  return ['src', 'test', 'helm', 'migrations', 'scripts'].flatMap((dir) =>
    (readdirSync(join(ROOT, dir), { recursive: true }) as string[])
      .filter((file) => /\.(ts|mjs|js|ya?ml|tpl|txt|md)$/.test(file))
      .map((file) => join(dir, file)),
  );
}

/** Markdown without its code: links and text inside fences or backticks are examples, not links. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** Every inline link and image target, and every reference definition (`[name]: target`). */
function linkTargets(markdown: string): string[] {
  const text = prose(markdown);
  const inline = [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]);
  const references = [...text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1]);
  return [...inline, ...references];
}

function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target);
}

/** The anchors a renderer such as GitHub gives the headings of a Markdown file. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Anchors are checked with the headings as written, code spans included (their text is part of the slug). */
function anchorsOf(file: string): Set<string> {
  const markdown = readFileSync(file, 'utf8').replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  return headingAnchors(markdown.replace(/`([^`\n]*)`/g, '$1'));
}

describe('documentation links', () => {
  const files = documentationFiles();

  it('finds the documentation', () => {
    for (const file of ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'docs/agents.md']) {
      assert.ok(files.includes(file), `${file} is missing`);
    }
  });

  it('every relative link points at a file of the repository, and at a heading of it when it names one', () => {
    const broken: string[] = [];
    for (const file of files) {
      const path = join(ROOT, file);
      for (const target of linkTargets(readFileSync(path, 'utf8'))) {
        if (isExternal(target)) continue;
        const [pathPart, anchor] = target.split('#', 2);
        const linked = pathPart === '' ? path : resolve(dirname(path), decodeURIComponent(pathPart));
        if (!linked.startsWith(ROOT + '/') || !existsSync(linked)) {
          broken.push(`${file}: ${target} (no such file in the repository)`);
          continue;
        }
        if (anchor && linked.endsWith('.md') && statSync(linked).isFile() && !anchorsOf(linked).has(anchor)) {
          broken.push(`${file}: ${target} (no heading "${anchor}" in ${relative(ROOT, linked)})`);
        }
      }
    }
    assert.deepEqual(broken, []);
  });

  it('no path in the text leads out of the repository or to a file it does not contain', () => {
    // Code spans count too: a path quoted as an example is still one a reader would follow.
    const offending: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const [path] of text.matchAll(/(?:\.\.\/)+[\w.-]+(?:\/[\w.-]+)*/g)) {
        const target = resolve(dirname(join(ROOT, file)), path);
        const inside = !relative(ROOT, target).startsWith('..');
        if (!inside || !existsSync(target)) offending.push(`${file}: ${path}`);
      }
    }
    assert.deepEqual(offending, []);
  });

  it('cites sections only of documents that name themselves (RFC 8414 §3.3), in docs and code alike', () => {
    const offending: string[] = [];
    for (const file of [...files, ...sourceFiles()]) {
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, index) => {
          for (const match of line.matchAll(/\u00a7/g)) {
            const before = line.slice(0, match.index);
            if (!/RFC \d+[^\u00a7]*$/.test(before)) offending.push(`${file}:${index + 1}: ${line.trim()}`);
          }
        });
    }
    assert.deepEqual(offending, []);
  });
});
