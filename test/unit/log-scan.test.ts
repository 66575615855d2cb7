import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MessageCursor } from '#app/mail/message-cursor.js';
import { scanLogDir, SecretScanner } from '../support/log-scan';
import { SECRETS_SUBDIR } from '../support/test-logs';

const linkToken = () => randomBytes(32).toString('base64url');
const base62 = (n: number) =>
  [...randomBytes(n)].map((b) => '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'[b % 62]).join('');
const jwt = () =>
  [{ alg: 'RS256' }, { sub: 'agent' }].map((p) => Buffer.from(JSON.stringify(p)).toString('base64url')).join('.') +
  `.${randomBytes(256).toString('base64url')}`;

/** A request-log line as the server writes it. */
const requestLine = (path: string) =>
  `{"level":"info","time":"2026-12-04T12:00:00.000Z","service":"alcarta","pid":1,"reqId":7,"req":{"method":"GET","path":"${path}"},"res":{"status":200},"responseTime":3,"msg":"request completed"}`;

/** The log scan of the whole test run (test/support/log-scan.ts): it must find what leaks and nothing else. */
describe('log scan', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'alcarta-log-scan-test-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('finds planted secrets by value and by shape, naming file, line and kind', async () => {
    const recordedLink = linkToken();
    const recordedSession = linkToken();
    const bootstrap = `alc_${base62(48)}`;
    await mkdir(join(dir, SECRETS_SUBDIR));
    await writeFile(
      join(dir, SECRETS_SUBDIR, 'x.test.1.jsonl'),
      [
        { kind: 'approval-link token (mail)', value: recordedLink, test: 'x.test' },
        { kind: 'console cookie alcarta_console', value: recordedSession, test: 'x.test' },
        { kind: 'bootstrap token', value: bootstrap, test: 'x.test' },
      ]
        .map((r) => JSON.stringify(r))
        .join('\n') + '\n',
    );
    await writeFile(
      join(dir, 'x.test.1.log'),
      [
        requestLine('/v1/mailboxes/mbx_0123456789abcdefABCDEF/messages'),
        requestLine(`/console/links/${recordedLink}`),
        `{"level":"debug","msg":"cut ${recordedSession.slice(0, 20)}"}`,
        `{"level":"warn","msg":"encoded x${recordedSession.replaceAll('-', '%2D').replaceAll('_', '%5F')}y"}`,
        `{"level":"error","msg":"Bearer ${jwt()}"}`,
        `{"level":"info","msg":"ticket wst_${base62(43)}"}`,
        requestLine(`/console/links/${linkToken()}`),
        `{"level":"info","msg":"a form token \\"A1b${linkToken().slice(3)}\\" in a message"}`,
      ].join('\n') + '\n',
    );
    await writeFile(
      join(dir, 'x.test.1.spawned-2.stderr.log'),
      [
        '',
        '='.repeat(80),
        ' Alcarta admin token (shown once; store it now, it is kept only as a hash):',
        '',
        `   ${bootstrap}`,
        '',
        ' token id: tok_0123456789abcdefABCDEF   scopes: all   mailboxes: *',
        '='.repeat(80),
        `and then it leaks: ${bootstrap}`,
      ].join('\n'),
    );

    const report = await scanLogDir(dir);
    assert.equal(report.files, 2);
    assert.equal(report.recorded, 3);
    const where = report.findings.map((f) => `${f.file}:${f.line}`);
    assert.deepEqual(where, [
      'x.test.1.log:2',
      'x.test.1.log:3',
      'x.test.1.log:4',
      'x.test.1.log:5',
      'x.test.1.log:6',
      'x.test.1.log:7',
      'x.test.1.log:8',
      'x.test.1.spawned-2.stderr.log:9',
    ]);
    const [link, cut, encoded, token, ticket, unrecordedLink, bare, banner] = report.findings.map((f) => f.kinds);
    assert.ok(link.includes('approval-link token (mail), recorded by x.test'), link.join());
    assert.ok(link.includes('secret-shaped path segment in a request log'), link.join());
    assert.deepEqual(cut, ['console cookie alcarta_console, recorded by x.test']);
    assert.deepEqual(encoded, ['console cookie alcarta_console, recorded by x.test']);
    assert.deepEqual(token, ['JWT']);
    assert.deepEqual(ticket, ['websocket ticket (wst_…)']);
    assert.ok(unrecordedLink.includes('approval-link token in a path'), unrecordedLink.join());
    assert.deepEqual(bare, ['43-character base64url token']);
    assert.ok(banner.includes('static token secret (alc_…)'), banner.join());
    for (const finding of report.findings) {
      assert.ok(!finding.excerpt.includes(recordedLink) && !finding.excerpt.includes(bootstrap), finding.excerpt);
      assert.match(finding.excerpt, /«secret»/);
    }
  });

  it('finds nothing in what legitimately fills logs: ids, cursors, hashes, Message-IDs, masked secrets', () => {
    const recorded = linkToken();
    const scanner = new SecretScanner([
      { kind: 'approval-link token', value: recorded },
      // A value a test made up to be refused is no secret: it must not match ids of the same letters.
      { kind: 'websocket ticket', value: `wst_${'A'.repeat(43)}` },
    ]);
    const cursor = MessageCursor.fromPositions([
      [17, 123456789],
      [4242, 987654321],
      [9, 5],
    ]).toString();
    const clean = [
      requestLine('/v1/mailboxes/mbx_0123456789abcdefABCDEF/messages/msg_0123456789abcdefABCDEF'),
      requestLine('/v1/requests/chk_0123456789abcdefABCDEF/approve'),
      requestLine('/v1/tokens/mbx_AAAAAAAAAAAAAAAAAAAAAA'),
      requestLine('/console/links/[REDACTED]'),
      requestLine('/v1/tokens/alc_[REDACTED]'),
      requestLine('/console/links/thisTokenWasNeverIssued'),
      `{"level":"info","caller":{"token_id":"tok_0123456789abcdefABCDEF","principal":"prn_0123456789abcdefABCDEF"}}`,
      `{"level":"debug","msg":"wait wt_0123456789abcdefABCDEF task task_0123456789abcdefABCDEF grant grt_0123456789abcdefABCDEF"}`,
      `{"level":"info","since_cursor":"${cursor}"}`,
      `{"level":"info","session":"${randomBytes(32).toString('hex')}"}`,
      `{"level":"info","message_id_header":"<${linkToken()}@mail.example.com>"}`,
      `{"level":"info","dkim":"bh=${randomBytes(32).toString('base64').replace(/[+/]/g, 'A')}"}`,
      `{"level":"info","msg":"a very-long-kebab-case-identifier-of-43chars here"}`,
      `{"level":"error","msg":"Bearer eyJ[REDACTED]","cookie":"alcarta_console=[REDACTED]","url":"/cb?code=[REDACTED]&state=[REDACTED]"}`,
      `{"level":"info","relay":"smtp://relay-user:[REDACTED]@127.0.0.1:2525"}`,
    ];
    for (const line of clean) assert.equal(scanner.scanLine(line), undefined, line);
    assert.ok(scanner.scanLine(`{"level":"info","msg":"${recorded}"}`), 'the recorded value itself is found');
  });
});
