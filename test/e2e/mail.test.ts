import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp, rawMcp } from '../support/mcp';
import type { RestClient, RestResponse } from '../support/rest';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';

/** Inbound summaries carry the sender authentication of docs/mail.md (JSON ingest: nothing checked). */
const SUMMARY_FIELDS = [
  'authentication',
  'direction',
  'from',
  'from_verified',
  'mailbox_id',
  'message_id',
  'received_at',
  'subject',
  'to',
];
const UNCHECKED = { authentication: { spf: 'none', dkim: 'none', dmarc: 'none', arc: 'none' }, from_verified: false };
const DETAIL_FIELDS = [...SUMMARY_FIELDS, 'cc', 'html', 'in_reply_to', 'message_id_header', 'text', 'thread_id'].sort();

/** A unique Message-ID header value, angle brackets included. */
const newMessageId = () => `<${randomUUID()}@sender.example.org>`;

/** Joins header and body lines with CRLF, as RFC 5322 wants. */
const rfc822 = (...lines: string[]) => lines.join('\r\n') + '\r\n';

const validJson = () => ({ from: 'sender@example.org', to: ['agent@example.com'], subject: 'Hi', text: 'Body' });

/**
 * The mail tools (list_messages, get_message; docs/agents.md "Tools") and ingest
 * (docs/rest-api.md): JSON and raw RFC 5322, threading, idempotency on the Message-ID header,
 * validation (nothing stored on bad input) and size limits.
 */
describe('mail: ingest and reading', () => {
  let server: TestServer;
  let agent: Client;
  let ingester: RestClient;

  const ingestPath = (mailboxId: string) => `/v1/mailboxes/${mailboxId}/messages`;
  const count = async (db: TestServer['db'], sql: string, params: unknown[] = []) =>
    Number((await db.query<{ n: string }>(sql, params))[0].n);
  const countMessages = (mailboxId: string) =>
    count(server.db, 'SELECT count(*) AS n FROM messages WHERE mailbox_id = $1', [mailboxId]);
  /** A REST answer is a 400 invalid_request with this reason (and a message for people). */
  const assertInvalid = (res: RestResponse, reason: string, what: string) => {
    assert.equal(res.status, 400, `${what}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error, 'invalid_request', what);
    assert.equal(res.body.reason, reason, what);
    assert.equal(typeof res.body.message, 'string', what);
  };
  const postRaw = (mailboxId: string, raw: string | Buffer) =>
    ingester.raw('POST', ingestPath(mailboxId), raw, 'message/rfc822');
  const getMessage = (messageId: string) => callOk(agent, 'get_message', { message_id: messageId });

  /** A tool error with this code (and reason, when given). */
  const assertToolError = (err: { error: string; reason: string }, error: string, reason?: string, what = '') => {
    assert.equal(err.error, error, what);
    if (reason) assert.equal(err.reason, reason, what);
  };

  before(async () => {
    server = await startTestServer();
    const token = await createToken(server.admin, { scopes: ['mail:read', 'mail:ingest'], mailboxes: ['*'] });
    ingester = server.admin.withToken(token.secret);
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('JSON ingest answers 201 {message_id}; list_messages and get_message show exactly the documented fields', async () => {
    const mailboxId = await createMailbox(server.admin);
    const header = newMessageId();
    const res = await ingester.post(ingestPath(mailboxId), {
      from: 'alice@example.org',
      to: ['agent@example.com', 'other@example.com'],
      cc: ['boss@example.org'],
      subject: 'Quarterly numbers',
      text: 'See attached.',
      html: '<p>See attached.</p>',
      message_id_header: header,
    });
    assert.equal(res.status, 201);
    assert.match(res.body.message_id, /^msg_[0-9A-Za-z]+$/);
    const messageId: string = res.body.message_id;

    const page = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
    assert.equal(page.messages.length, 1);
    assert.equal(typeof page.next_cursor, 'string');
    const summary = page.messages[0];
    assert.deepEqual(Object.keys(summary).sort(), SUMMARY_FIELDS);
    const { received_at: receivedAt, ...rest } = summary;
    const [from, to, subject] = ['alice@example.org', ['agent@example.com', 'other@example.com'], 'Quarterly numbers'];
    assert.deepEqual(rest, {
      message_id: messageId,
      mailbox_id: mailboxId,
      direction: 'inbound',
      from,
      to,
      subject,
      ...UNCHECKED,
    });
    assert.ok(Math.abs(Date.parse(receivedAt) - Date.now()) < 5 * 60_000, 'received_at is about now');

    const { thread_id: threadId, ...message } = await getMessage(messageId);
    assert.deepEqual(Object.keys({ ...message, thread_id: threadId }).sort(), DETAIL_FIELDS);
    const detail = { cc: ['boss@example.org'], text: 'See attached.', html: '<p>See attached.</p>' };
    assert.deepEqual(message, { ...summary, ...detail, message_id_header: header, in_reply_to: null });
    assert.equal(typeof threadId, 'string');
  });

  it('keeps the received_at given in a JSON ingest', async () => {
    const mailboxId = await createMailbox(server.admin);
    const receivedAt = '2026-03-04T05:06:07.000Z';
    const messageId = (await ingester.post(ingestPath(mailboxId), { ...validJson(), received_at: receivedAt })).body
      .message_id;
    assert.equal((await getMessage(messageId)).received_at, receivedAt);
    const page = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
    assert.equal(page.messages[0].received_at, receivedAt);
  });

  it('parses a raw RFC 5322 message: encoded words, display names, multipart/alternative, quoted-printable', async () => {
    const mailboxId = await createMailbox(server.admin);
    const parentHeader = newMessageId();
    const parentId = await ingest(ingester, mailboxId, { message_id_header: parentHeader });
    const header = newMessageId();
    const subject = 'Grüße aus Köln ✓';
    const raw = rfc822(
      'From: "Ada Lovelace" <ada@example.org>',
      'To: "Bob B." <bob@example.com>, carol@example.com',
      'Cc: Dave <dave@example.net>, "Eve, E." <eve@example.net>',
      `Subject: =?UTF-8?B?${Buffer.from(subject).toString('base64')}?=`,
      'Date: Tue, 01 Dec 2026 10:00:00 +0000',
      `Message-ID: ${header}`,
      `In-Reply-To: ${parentHeader}`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/alternative; boundary="alt-boundary"',
      '',
      '--alt-boundary',
      'Content-Type: text/plain; charset=UTF-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      'Caf=C3=A9 au lait, s=',
      '=27il vous pla=C3=AEt.',
      '--alt-boundary',
      'Content-Type: text/html; charset=UTF-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      '<p>Caf=C3=A9 <b>au lait</b></p>',
      '--alt-boundary--',
    );
    const res = await postRaw(mailboxId, raw);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.match(res.body.message_id, /^msg_/);

    const message = await getMessage(res.body.message_id);
    const parent = await getMessage(parentId);
    assert.equal(message.direction, 'inbound');
    assert.equal(message.subject, subject);
    assert.equal(message.from, 'ada@example.org');
    assert.deepEqual(message.to, ['bob@example.com', 'carol@example.com']);
    assert.deepEqual(message.cc, ['dave@example.net', 'eve@example.net']);
    assert.equal(message.text.trim(), "Café au lait, s'il vous plaît.");
    assert.equal(message.html.trim(), '<p>Café <b>au lait</b></p>');
    assert.equal(message.message_id_header, header);
    assert.equal(message.in_reply_to, parentHeader);
    assert.equal(message.thread_id, parent.thread_id, 'a reply joins the thread of the message it answers');
  });

  it('threads by In-Reply-To or References within one mailbox; unrelated messages start a new thread', async () => {
    const mailboxId = await createMailbox(server.admin);
    const otherMailboxId = await createMailbox(server.admin);
    const rootHeader = newMessageId();
    const root = await getMessage(await ingest(ingester, mailboxId, { message_id_header: rootHeader }));

    const viaReferences = rfc822(
      'From: bob@example.com',
      'To: agent@example.com',
      'Subject: Re: Hello',
      `Message-ID: ${newMessageId()}`,
      `References: ${newMessageId()} ${rootHeader}`,
      '',
      'Answer via References only.',
    );
    const refRes = await postRaw(mailboxId, viaReferences);
    assert.equal(refRes.status, 201, JSON.stringify(refRes.body));
    assert.equal((await getMessage(refRes.body.message_id)).thread_id, root.thread_id);

    const viaJson = await getMessage(await ingest(ingester, mailboxId, { in_reply_to: rootHeader }));
    assert.equal(viaJson.thread_id, root.thread_id);
    assert.equal(viaJson.in_reply_to, rootHeader);

    const unrelated = await getMessage(await ingest(ingester, mailboxId, { message_id_header: newMessageId() }));
    assert.notEqual(unrelated.thread_id, root.thread_id);
    const elsewhere = await getMessage(await ingest(ingester, otherMailboxId, { in_reply_to: rootHeader }));
    assert.notEqual(elsewhere.thread_id, root.thread_id, 'threads never reach into another mailbox');
  });

  it('refuses an empty raw message, one without a parseable From, and nothing is stored', async () => {
    const mailboxId = await createMailbox(server.admin);
    const cases: Array<[string, string | Buffer, string]> = [
      ['empty body', '', 'empty_message'],
      ['no From header', rfc822('To: agent@example.com', 'Subject: x', '', 'body'), 'missing_from'],
      ['not an email at all', 'just some words, no headers', 'missing_from'],
      ['binary noise', Buffer.from([0, 1, 2, 255, 254, 0, 13, 10, 13, 10, 7]), 'missing_from'],
    ];
    for (const [what, body, reason] of cases) {
      assertInvalid(await postRaw(mailboxId, body), reason, what);
    }
    assert.equal(await countMessages(mailboxId), 0);
  });

  describe('idempotency on the Message-ID header', () => {
    it('a second JSON ingest of one Message-ID returns the same message_id and stores nothing new', async () => {
      const mailboxId = await createMailbox(server.admin);
      const header = newMessageId();
      const first = await ingester.post(ingestPath(mailboxId), { ...validJson(), message_id_header: header });
      const second = await ingester.post(ingestPath(mailboxId), { ...validJson(), message_id_header: header });
      assert.equal(first.status, 201);
      assert.equal(second.status, 201);
      assert.equal(second.body.message_id, first.body.message_id);
      assert.equal(await countMessages(mailboxId), 1);
      const { messages } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
      assert.equal(messages.length, 1);
      assert.equal(messages[0].message_id, first.body.message_id);
    });

    it('JSON and raw ingest of one Message-ID are the same message', async () => {
      const mailboxId = await createMailbox(server.admin);
      const header = newMessageId();
      const viaJson = await ingest(ingester, mailboxId, { message_id_header: header });
      const viaRaw = await postRaw(mailboxId, rfc822('From: a@example.org', `Message-ID: ${header}`, '', 'Hello'));
      assert.equal(viaRaw.status, 201);
      assert.equal(viaRaw.body.message_id, viaJson);
      assert.equal(await countMessages(mailboxId), 1);
    });

    it('10 concurrent ingests of one Message-ID produce exactly one message', async () => {
      const mailboxId = await createMailbox(server.admin);
      const header = newMessageId();
      const send = () => ingester.post(ingestPath(mailboxId), { ...validJson(), message_id_header: header });
      const results = await Promise.all(Array.from({ length: 10 }, send));
      assert.ok(
        results.every((r) => r.status === 201),
        results.map((r) => r.status).join(','),
      );
      assert.equal(new Set(results.map((r) => r.body.message_id)).size, 1);
      assert.equal(await countMessages(mailboxId), 1);
    });

    it('the same Message-ID in two mailboxes is two messages', async () => {
      const [a, b] = [await createMailbox(server.admin), await createMailbox(server.admin)];
      const header = newMessageId();
      const inA = await ingest(ingester, a, { message_id_header: header });
      const inB = await ingest(ingester, b, { message_id_header: header });
      assert.notEqual(inA, inB);
      assert.equal(await countMessages(a), 1);
      assert.equal(await countMessages(b), 1);
      assert.equal((await getMessage(inB)).mailbox_id, b);
    });
  });

  it('bad ingest input answers 400 invalid_request with a specific reason and changes nothing', async () => {
    const mailboxId = await createMailbox(server.admin);
    await ingest(ingester, mailboxId);
    const { subject: _s, ...noSubject } = validJson();
    const { text: _t, ...noText } = validJson();
    const jsonCases: Array<[string, unknown, string, string?]> = [
      ['invalid from', { ...validJson(), from: 'not-an-address' }, 'invalid_field', 'from'],
      ['invalid to entry', { ...validJson(), to: ['a@b.org', 'nope'] }, 'invalid_field', 'to'],
      ['to not a list', { ...validJson(), to: 'agent@example.com' }, 'invalid_field', 'to'],
      ['missing subject', noSubject, 'missing_field', 'subject'],
      ['missing text', noText, 'missing_field', 'text'],
      ['unknown field', { ...validJson(), priority: 'high' }, 'unknown_field', 'priority'],
      ['bad received_at', { ...validJson(), received_at: 'yesterday' }, 'invalid_field', 'received_at'],
      ['JSON array body', [validJson()], 'invalid_body'],
    ];
    for (const [what, body, reason, field] of jsonCases) {
      const res = await ingester.post(ingestPath(mailboxId), body);
      assertInvalid(res, reason, what);
      if (field) assert.equal(res.body.field, field, what);
    }
    const rawCases: Array<[string, string, string, string]> = [
      ['malformed JSON', '{"from": "a@b.org",', 'application/json', 'malformed_json'],
      ['text/plain body', 'From: a@b.org\r\n\r\nhi', 'text/plain', 'unsupported_content_type'],
      ['form body', 'from=a%40b.org', 'application/x-www-form-urlencoded', 'unsupported_content_type'],
    ];
    for (const [what, body, type, reason] of rawCases) {
      assertInvalid(await ingester.raw('POST', ingestPath(mailboxId), body, type), reason, what);
    }
    assert.equal(await countMessages(mailboxId), 1);
    const unknown = await ingester.post(ingestPath('mbx_doesNotExist'), validJson());
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error, 'not_found');
  });

  it('bodies over the configured limits answer 413: ingest by ALCARTA_MAX_INGEST_BYTES, JSON and /mcp by ALCARTA_MAX_BODY_BYTES', async () => {
    const small = await startTestServer({
      env: { ALCARTA_MAX_BODY_BYTES: '4096', ALCARTA_MAX_INGEST_BYTES: '16384' },
    });
    try {
      const mailboxId = await createMailbox(small.admin);
      const path = ingestPath(mailboxId);
      const mailboxCount = () => count(small.db, 'SELECT count(*) AS n FROM mailboxes');
      const stored = () => count(small.db, 'SELECT count(*) AS n FROM messages');

      const withinIngestLimit = await small.admin.post(path, { ...validJson(), text: 'x'.repeat(8000) });
      assert.equal(withinIngestLimit.status, 201, 'ingest takes more than the general JSON limit');
      assert.equal(await stored(), 1);

      const assertTooLarge = (res: RestResponse, what: string) => {
        assert.equal(res.status, 413, what);
        assert.equal(res.body.error, 'invalid_request', what);
        assert.equal(res.body.reason, 'body_too_large', what);
      };
      assertTooLarge(await small.admin.post(path, { ...validJson(), text: 'x'.repeat(20_000) }), 'JSON ingest');
      const raw = rfc822('From: a@example.org', 'To: b@example.com', 'Subject: big', '', 'y'.repeat(20_000));
      assertTooLarge(await small.admin.raw('POST', path, raw, 'message/rfc822'), 'raw ingest');
      assert.equal(await stored(), 1, 'nothing stored from an oversized ingest');

      const mailboxesBefore = await mailboxCount();
      const bigMailbox = { address: 'big@example.com', name: 'n'.repeat(8000) };
      assertTooLarge(await small.admin.post('/v1/mailboxes', bigMailbox), 'admin JSON');
      assert.equal(await mailboxCount(), mailboxesBefore);

      const bigMcp = await rawMcp(small.url, small.adminToken, {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'list_mailboxes', arguments: {}, _meta: { padding: 'p'.repeat(8000) } },
      });
      assert.equal(bigMcp.status, 413);
    } finally {
      await small.close();
    }
  });

  describe('list_messages and get_message arguments', () => {
    let mailboxId: string;

    before(async () => {
      mailboxId = await createMailbox(server.admin);
      for (let i = 0; i < 25; i++) await ingest(ingester, mailboxId, { subject: `n${i}` });
    });

    it('pages 20 messages by default, then the rest after next_cursor', async () => {
      const subjects = (page: { messages: Array<{ subject: string }> }) => page.messages.map((m) => m.subject);
      const first = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
      assert.deepEqual(
        subjects(first),
        Array.from({ length: 20 }, (_, i) => `n${i}`),
      );
      const rest = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, since_cursor: first.next_cursor });
      assert.deepEqual(subjects(rest), ['n20', 'n21', 'n22', 'n23', 'n24']);
      const hundred = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 });
      assert.equal(hundred.messages.length, 25);
    });

    it('rejects a limit outside 1–100 or not an integer, and unknown arguments', async () => {
      for (const limit of [0, 101, 2.5, -1, '5']) {
        const err = await callError(agent, 'list_messages', { mailbox_id: mailboxId, limit });
        assertToolError(err, 'invalid_request', 'invalid_argument', `limit ${JSON.stringify(limit)}`);
      }
      const unknown = await callError(agent, 'list_messages', { mailbox_id: mailboxId, page: 2 });
      assertToolError(unknown, 'invalid_request', 'unknown_argument');
      assertToolError(await callError(agent, 'list_messages', {}), 'invalid_request', 'missing_argument');
    });

    it('rejects malformed cursors with reason invalid_cursor', async () => {
      const { next_cursor: cursor } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 3 });
      const malformed = [
        'not-a-cursor',
        '',
        randomUUID(),
        `${cursor}%`,
        `${cursor}A`,
        cursor.replace(/^[^.]*\./, 'zz9.'),
        `${cursor.slice(0, cursor.indexOf('.') + 1)}${Buffer.from('1:x').toString('base64url')}`,
      ];
      for (const since_cursor of malformed) {
        const err = await callError(agent, 'list_messages', { mailbox_id: mailboxId, since_cursor });
        assertToolError(err, 'invalid_request', 'invalid_cursor', `cursor ${JSON.stringify(since_cursor)}`);
      }
    });

    it('answers not_found for an unknown mailbox or message', async () => {
      assertToolError(await callError(agent, 'list_messages', { mailbox_id: 'mbx_doesNotExist' }), 'not_found');
      assertToolError(await callError(agent, 'get_message', { message_id: 'msg_doesNotExist' }), 'not_found');
      const badArg = await callError(agent, 'get_message', { message_id: 'msg_x', extra: true });
      assertToolError(badArg, 'invalid_request', 'unknown_argument');
    });
  });
});
