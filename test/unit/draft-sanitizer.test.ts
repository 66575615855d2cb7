import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { describeRemoved, noneRemoved, sanitizeDraftHtml } from '#app/approvals/draft-sanitizer.js';
import { contentSha256, RequestContent } from '#app/approvals/request-content.js';

const PIXEL =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

describe('draft sanitizer', () => {
  it('removes scripts, remote and relative images, and counts each', () => {
    const { html, removed } = sanitizeDraftHtml(
      '<p>Hello</p><img src="https://tracker.example.net/pixel.gif"><script>alert(1)</script>' +
        '<img src="relative.gif"><img src="//cdn.example.net/a.png">',
    );
    assert.equal(html, '<p>Hello</p>');
    assert.deepEqual(removed, { ...noneRemoved(), scripts: 1, remote_resources: 2, relative_resources: 1 });
  });

  it('keeps inline data images, links, tables and text formatting as written', () => {
    const kept = `<p><b>Bold</b> <a href="https://example.org/terms">terms</a></p><img src="${PIXEL}" alt="logo" /><table><tr><td colspan="2">x</td></tr></table>`;
    const { html, removed } = sanitizeDraftHtml(kept);
    assert.equal(html, kept);
    assert.deepEqual(removed, noneRemoved());
  });

  it('counts event handlers, javascript links, styles, forms, frames and other elements', () => {
    const { html, removed } = sanitizeDraftHtml(
      '<p onclick="steal()" style="color:red">Hi <a href="javascript:alert(1)">x</a></p>' +
        '<style>p{}</style><form action="https://evil.example/"><input name="q"></form>' +
        '<iframe src="https://evil.example/"></iframe><link rel="stylesheet" href="https://cdn.example/x.css">' +
        '<meta http-equiv="refresh" content="0;url=https://evil.example/"><img src="cid:part1"><svg></svg>',
    );
    assert.doesNotMatch(html, /onclick|style|javascript|form|input|iframe|link|meta|svg|cid:/i);
    assert.deepEqual(removed, {
      scripts: 1,
      event_handlers: 1,
      remote_resources: 2,
      relative_resources: 1,
      styles: 2,
      forms: 2,
      other_elements: 2,
    });
  });

  it('is idempotent: a sanitized draft sanitizes to itself and nothing more is removed', () => {
    const once = sanitizeDraftHtml(
      '<div onmouseover="x()"><img src="https://t.example/p.gif"><p>Quote: &lt;b&gt; &amp; "q"</p></div>',
    );
    const twice = sanitizeDraftHtml(once.html);
    assert.equal(twice.html, once.html);
    assert.deepEqual(twice.removed, noneRemoved());
  });

  it('names what was removed for people', () => {
    assert.equal(describeRemoved(noneRemoved()), '');
    assert.equal(
      describeRemoved({ ...noneRemoved(), scripts: 1, remote_resources: 2 }),
      '1 script, 2 remote resources (images, frames, media or stylesheets)',
    );
  });
});

describe('request content hash', () => {
  const email: RequestContent = {
    kind: 'send_email',
    mailbox_id: 'mbx_a',
    from: 'agent@example.com',
    to: ['a@example.org'],
    cc: [],
    subject: 'Hi',
    text: 'Hello',
    html: '<p>Hello</p>',
    in_reply_to: null,
    title: 'Send email "Hi" to a@example.org',
    details: null,
  };

  it('is the SHA-256 of the documented canonical JSON array', () => {
    const canonical = JSON.stringify([
      'alcarta.request-content.v1',
      'send_email',
      'mbx_a',
      'agent@example.com',
      ['a@example.org'],
      [],
      'Hi',
      'Hello',
      '<p>Hello</p>',
      null,
      'Send email "Hi" to a@example.org',
      null,
    ]);
    assert.equal(contentSha256(email), createHash('sha256').update(canonical).digest('hex'));
    assert.match(contentSha256(email), /^[0-9a-f]{64}$/);
  });

  it('changes with every field a person approves', () => {
    const base = contentSha256(email);
    const variants: Partial<RequestContent>[] = [
      { kind: 'approval' },
      { mailbox_id: 'mbx_b' },
      { from: 'other@example.com' },
      { to: ['b@example.org'] },
      { cc: ['a@example.org'] },
      { subject: 'Hi!' },
      { text: 'Hello.' },
      { html: null },
      { in_reply_to: 'msg_x' },
      { title: 'Other' },
      { details: '' },
    ];
    for (const change of variants)
      assert.notEqual(contentSha256({ ...email, ...change }), base, JSON.stringify(change));
    // Moving text between fields is a different content too.
    assert.notEqual(
      contentSha256({ ...email, subject: 'HiHello', text: '' }),
      contentSha256({ ...email, subject: 'Hi', text: 'Hello' }),
    );
  });
});
