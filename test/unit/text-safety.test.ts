import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import {
  findJsonProblem,
  hasUnstorableText,
  repairText,
  truncateChars,
  truncateUtf8,
} from '#app/common/text-safety.js';
import { withBoundedHeaderBlock } from '#app/mail/rfc822-header-block.js';

describe('text safety', () => {
  it('finds NUL and unpaired surrogates, and only those', () => {
    for (const bad of [
      '\u0000',
      'a\u0000',
      '\ud800',
      'a\ud800b',
      '\udc00',
      'x\udfffy',
      '\ud800\ud800\udc00',
      'a\udc00\ud800',
    ]) {
      assert.equal(hasUnstorableText(bad), true, JSON.stringify(bad));
    }
    for (const good of ['', 'plain', 'é ü ß', '😀', 'a\ud83d\ude00b', '\uFFFD', '\u0001\u001f']) {
      assert.equal(hasUnstorableText(good), false, JSON.stringify(good));
    }
  });

  it('repairText replaces each offending unit with U+FFFD and keeps pairs', () => {
    assert.equal(repairText('a\u0000b\u0000'), 'a\uFFFDb\uFFFD');
    assert.equal(repairText('\ud800\ud83d\ude00\udc00'), '\uFFFD😀\uFFFD');
    assert.equal(repairText('\udc00\ud800'), '\uFFFD\uFFFD');
    const clean = 'nothing to do 😀';
    assert.equal(repairText(clean), clean);
  });

  it('findJsonProblem reports the first value or key with unstorable text, with its path', () => {
    assert.equal(findJsonProblem({ a: 'ok', b: [1, 'x', { c: null }] }), undefined);
    assert.deepEqual(findJsonProblem({ a: 'ok', b: [1, 'x\u0000'] }), { kind: 'invalid_characters', path: 'b.1' });
    assert.deepEqual(findJsonProblem({ a: { 'k\ud800': 1 } }), { kind: 'invalid_characters', path: 'a.k\uFFFD' });
    assert.deepEqual(findJsonProblem({ a: 'x\u0000', b: 'y\u0000' }), { kind: 'invalid_characters', path: 'a' });
    assert.deepEqual(findJsonProblem('\u0000'), { kind: 'invalid_characters', path: '' });
    assert.equal(findJsonProblem({ a: 'x\u0000' }, { checkText: false }), undefined);
  });

  it('findJsonProblem limits depth without recursion (100,000 levels)', () => {
    const nest = (depth: number) => JSON.parse('['.repeat(depth) + ']'.repeat(depth)) as unknown;
    assert.equal(findJsonProblem(nest(64)), undefined);
    assert.equal(findJsonProblem(nest(65))?.kind, 'too_deep');
    assert.equal(findJsonProblem(nest(100_000))?.kind, 'too_deep');
    assert.equal(findJsonProblem(nest(3), { maxDepth: 2 })?.kind, 'too_deep');
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) deep = { k: deep };
    assert.deepEqual(findJsonProblem(deep, { maxDepth: 2 }), { kind: 'too_deep', path: 'k.k' });
  });

  it('truncateUtf8 cuts at a character boundary within the byte limit', () => {
    assert.equal(truncateUtf8('abc', 2), 'ab');
    assert.equal(truncateUtf8('abc', 3), 'abc');
    assert.equal(truncateUtf8('éé', 3), 'é');
    assert.equal(truncateUtf8('a😀', 4), 'a');
    assert.equal(truncateUtf8('a😀', 5), 'a😀');
    const long = '€'.repeat(1000);
    const cut = truncateUtf8(long, 998);
    assert.ok(Buffer.byteLength(cut) <= 998 && Buffer.byteLength(cut) > 995);
  });

  it('truncateChars never leaves half a surrogate pair', () => {
    assert.equal(truncateChars('abcdef', 3), 'abc');
    assert.equal(truncateChars('ab😀', 3), 'ab');
    assert.equal(truncateChars('ab😀', 4), 'ab😀');
  });
});

describe('header block of raw mail', () => {
  const crlf = (...lines: string[]) => Buffer.from(lines.join('\r\n'), 'latin1');

  it('ordinary headers reach the parser untouched', () => {
    const raw = crlf('From: a@example.org', 'Subject: hi', '', 'body');
    assert.equal(withBoundedHeaderBlock(raw), raw);
  });

  it('a huge header block keeps the fields Alcarta reads, cut, and the body; the parser accepts it', async () => {
    const references = Array.from({ length: 70_000 }, (_, i) => `<r${i}@example.org>`);
    const raw = crlf(
      ...Array.from({ length: 20_000 }, (_, i) => `X-Noise-${i}: n`),
      'From: Sender <sender@example.org>',
      `Subject: ${'s'.repeat(40_000)}`,
      `References: ${references.join('\r\n ')}`,
      'Message-ID: <id@example.org>',
      '',
      'the body',
    );
    await assert.rejects(simpleParser(raw), /Max header size/, 'the parser alone refuses it');
    const parsed = await simpleParser(withBoundedHeaderBlock(raw));
    assert.equal(parsed.from?.value[0].address, 'sender@example.org');
    assert.equal(parsed.messageId, '<id@example.org>');
    assert.equal(parsed.subject?.length, 16 * 1024 - 'Subject: '.length);
    const kept = parsed.references as string[];
    assert.equal(kept[kept.length - 1], '<r69999@example.org>', 'References keeps its end');
    assert.ok(
      kept.every((r) => /^<r\d+@example\.org>$/.test(r)),
      'cut at an id boundary',
    );
    assert.equal(parsed.text, 'the body');
  });

  it('a message that is all header (no body) is handled', async () => {
    const raw = crlf('From: a@example.org', ...Array.from({ length: 30_000 }, () => 'X: y'));
    const parsed = await simpleParser(withBoundedHeaderBlock(raw));
    assert.equal(parsed.from?.value[0].address, 'a@example.org');
  });
});
