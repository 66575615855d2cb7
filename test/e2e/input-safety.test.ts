import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { callError, callOk, connectMcp, rawMcp } from '../support/mcp';
import type { RestClient, RestResponse } from '../support/rest';
import { rejectsWith, startTask, taskResult, taskToolError } from '../support/tasks';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';

const rfc822 = (...lines: string[]) => lines.join('\r\n') + '\r\n';
const encodedWord = (charset: string, bytes: Buffer) => `=?${charset}?B?${bytes.toString('base64')}?=`;
/** JSON text nested `depth` arrays deep. */
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
/** Texts PostgreSQL cannot store: a NUL, a lone high surrogate, a lone low surrogate. */
const UNSTORABLE = ['a\u0000b', 'a\ud800b', 'a\udc00b'];
/** What each of them becomes where it is shown or stored repaired. */
const repaired = (text: string) =>
  [...text].map((c) => (c === '\u0000' || /^[\ud800-\udfff]$/.test(c) ? '\uFFFD' : c)).join('');

/**
 * "No input produces a 5xx" (docs/operators.md, "Limits and hardening"), the data side: text
 * PostgreSQL cannot store is refused as `invalid_characters` in JSON and MCP arguments and repaired
 * (U+FFFD) in raw mail; over-long mail headers are stored cut; ids that cannot exist are not found;
 * deep JSON is refused before routing. Every answer names its specific reason: none may come from
 * the database backstop (`invalid_input`).
 */
describe('input safety: unstorable text, over-long mail headers, impossible ids, deep JSON', () => {
  let server: TestServer;
  let mailboxId: string;
  let token: { id: string; secret: string };
  let rest: RestClient;
  let agent: Client;

  const ingestPath = (id = mailboxId) => `/v1/mailboxes/${id}/messages`;
  const postRaw = (raw: string | Buffer) => rest.raw('POST', ingestPath(), raw, 'message/rfc822');
  const count = async (sql: string, params: unknown[] = []) =>
    Number((await server.db.query<{ n: string }>(sql, params))[0].n);
  const countMessages = () => count('SELECT count(*) AS n FROM messages WHERE mailbox_id = $1', [mailboxId]);
  const assertRefused = (res: RestResponse, status: number, error: string, reason: string, what: string) => {
    assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error, error, what);
    assert.equal(res.body.reason, reason, what);
    assert.equal(typeof res.body.message, 'string', what);
  };
  const ingested = (res: RestResponse, what: string): string => {
    assert.equal(res.status, 201, `${what}: ${JSON.stringify(res.body)}`);
    return res.body.message_id as string;
  };
  const getMessage = (messageId: string) => callOk(agent, 'get_message', { message_id: messageId });

  before(async () => {
    server = await startTestServer();
    mailboxId = await createMailbox(server.admin);
    token = await createToken(server.admin, {
      scopes: ['mail:read', 'mail:ingest', 'mail:send', 'approvals:read', 'approvals:decide'],
      mailboxes: [mailboxId],
    });
    rest = server.admin.withToken(token.secret);
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('a JSON body with a NUL or a lone surrogate in any value or key is 400 invalid_characters naming the field', async () => {
    const message = { from: 'sender@example.org', to: ['agent@example.com'], subject: 'Hi', text: 'Body' };
    for (const bad of UNSTORABLE) {
      const cases: [string, string, unknown, string][] = [
        ['POST', ingestPath(), { ...message, text: bad }, 'text'],
        ['POST', ingestPath(), { ...message, subject: bad }, 'subject'],
        ['POST', ingestPath(), { ...message, html: bad }, 'html'],
        ['POST', ingestPath(), { ...message, message_id_header: `<${bad}@x>` }, 'message_id_header'],
        ['POST', ingestPath(), { ...message, to: ['agent@example.com', bad] }, 'to.1'],
        ['POST', '/v1/mailboxes', { address: `m-${randomUUID()}@example.com`, name: bad }, 'name'],
        ['POST', '/v1/tokens', { name: bad, scopes: ['mail:read'], mailboxes: [mailboxId] }, 'name'],
        ['POST', '/v1/tokens', { name: 'x', scopes: ['mail:read'], mailboxes: [bad] }, 'mailboxes.0'],
        [
          'POST',
          '/v1/tokens',
          { name: 'x', scopes: ['mail:read'], mailboxes: ['*'], [`k${bad}`]: 1 },
          `k${repaired(bad)}`,
        ],
      ];
      for (const [method, path, body, field] of cases) {
        const client = path.startsWith('/v1/mailboxes/') ? rest : server.admin;
        const res = await client.request(method, path, body);
        const what = `${method} ${path} ${JSON.stringify(body)}`;
        assertRefused(res, 400, 'invalid_request', 'invalid_characters', what);
        assert.equal(res.body.field, field, what);
      }
    }
    assert.equal(await countMessages(), 0, 'nothing was stored');
    assert.equal(await count('SELECT count(*) AS n FROM mailboxes'), 1);
    assert.equal(await count('SELECT count(*) AS n FROM tokens'), 2);
  });

  it('a received_at PostgreSQL cannot store (JavaScript reaches year -271821) is 400 invalid_field', async () => {
    const message = { from: 'sender@example.org', to: ['agent@example.com'], subject: 'Hi', text: 'Body' };
    for (const receivedAt of ['-271821-04-20T00:00:00Z', '+275760-09-13T00:00:00Z', '0000-12-31T00:00:00Z']) {
      const res = await rest.post(ingestPath(), { ...message, received_at: receivedAt });
      assertRefused(res, 400, 'invalid_request', 'invalid_field', receivedAt);
      assert.equal(res.body.field, 'received_at');
    }
    assert.equal(await countMessages(), 0);
  });

  it('a decision reason or a query parameter with a NUL is 400 invalid_characters', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'Go?' });
    assertRefused(
      await rest.post(`/v1/requests/${requestId}/approve`, { reason: 'fine\u0000' }),
      400,
      'invalid_request',
      'invalid_characters',
      'reason',
    );
    assert.equal((await callOk(agent, 'get_request', { request_id: requestId })).state, 'pending', 'not decided');
    const list = await rest.get('/v1/requests?mailbox_id=mbx_%00');
    assertRefused(list, 400, 'invalid_request', 'invalid_characters', 'query');
    assert.equal(list.body.field, 'mailbox_id');
  });

  it('path ids that cannot exist (NUL, another shape, over-long, unicode) are 404 not_found', async () => {
    const impossible = ['tok_%00', 'tok_a%00b', 'tok_%2F..', '..%2F..', '%F0%9F%98%80', `tok_${'a'.repeat(5000)}`];
    for (const id of impossible) {
      const what = `DELETE /v1/tokens/${id.slice(0, 40)}`;
      assertRefused(await server.admin.delete(`/v1/tokens/${id}`), 404, 'not_found', 'token_not_found', what);
      const chk = id.replace('tok_', 'chk_');
      for (const action of ['approve', 'reject']) {
        const res = await rest.post(`/v1/requests/${chk}/${action}`, {});
        assertRefused(res, 404, 'not_found', 'request_not_found', `${action} ${chk.slice(0, 40)}`);
      }
      const mbx = id.replace('tok_', 'mbx_');
      const res = await rest.post(ingestPath(mbx), { from: 'a@example.org', to: [], subject: 's', text: 't' });
      assertRefused(res, 404, 'not_found', 'mailbox_not_found', `ingest into ${mbx.slice(0, 40)}`);
    }
    // Percent-encoding that is not UTF-8 (here a lone surrogate) cannot be decoded: Express's 400.
    const undecodable = await server.admin.delete('/v1/tokens/tok_a%ED%A0%80');
    assert.equal(undecodable.status, 400);
    assert.equal(undecodable.body.error, 'invalid_request');
    // A well-shaped id of the wrong kind is not found either.
    assertRefused(await server.admin.delete(`/v1/tokens/${mailboxId}`), 404, 'not_found', 'token_not_found', 'mbx id');
  });

  it('raw mail with NUL bytes and lone surrogates is stored, those characters replaced by U+FFFD', async () => {
    const messageIdHeader = `<nul\u0000-${randomUUID()}@sender.example.org>`;
    const res = await postRaw(
      rfc822(
        'From: Sender <sender@example.org>',
        'To: agent@example.com',
        `Subject: ${encodedWord('utf-8', Buffer.from('zero\u0000here'))} ${encodedWord('utf-16le', Buffer.from([0x61, 0, 0x00, 0xd8, 0x62, 0]))}`,
        `Message-ID: ${messageIdHeader}`,
        '',
        'hello\u0000world',
      ),
    );
    const message = await getMessage(ingested(res, 'raw with NUL and a lone surrogate'));
    // Adjacent encoded words join without the space between them (RFC 2047).
    assert.equal(message.subject, 'zero\uFFFDherea\uFFFDb');
    assert.equal(message.text, 'hello\uFFFDworld\n');
    assert.equal(message.message_id_header, messageIdHeader.replace('\u0000', '\uFFFD'));
    const page = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
    assert.ok(page.messages.some((m: { subject: string }) => m.subject === message.subject));
  });

  it('a 3,000-character Message-ID is stored cut to 998 bytes; the same again is a duplicate, a reply joins its thread', async () => {
    const longId = `<${'x'.repeat(3000)}-${randomUUID()}@sender.example.org>`;
    const first = ingested(
      await postRaw(
        rfc822('From: s@example.org', 'To: agent@example.com', 'Subject: long', `Message-ID: ${longId}`, '', 'b'),
      ),
      'long Message-ID',
    );
    const stored = await getMessage(first);
    assert.equal(stored.message_id_header, longId.slice(0, 998));
    const again = await postRaw(
      rfc822('From: s@example.org', 'To: agent@example.com', 'Subject: long', `Message-ID: ${longId}`, '', 'b'),
    );
    assert.equal(again.status, 201);
    assert.deepEqual(again.body, { message_id: first, duplicate: true });
    const reply = ingested(
      await postRaw(
        rfc822('From: s@example.org', 'To: agent@example.com', 'Subject: Re: long', `In-Reply-To: ${longId}`, '', 'r'),
      ),
      'reply',
    );
    assert.equal((await getMessage(reply)).thread_id, stored.thread_id);

    // Multi-byte characters are cut at a character boundary, within the byte limit.
    const wideId = `<${'é'.repeat(1500)}@sender.example.org>`;
    const wide = await getMessage(
      ingested(
        await postRaw(
          Buffer.from(
            rfc822('From: s@example.org', 'To: agent@example.com', 'Subject: wide', `Message-ID: ${wideId}`, '', 'b'),
          ),
        ),
        'wide Message-ID',
      ),
    );
    assert.ok(Buffer.byteLength(wide.message_id_header) <= 998);
    assert.ok(wideId.startsWith(wide.message_id_header));
  });

  it('References with 70,000 ids and a 100,000-character subject: stored, cut, threaded by the nearest ids', async () => {
    const parentHeader = `<parent-${randomUUID()}@sender.example.org>`;
    const parent = ingested(
      await postRaw(
        rfc822(
          'From: s@example.org',
          'To: agent@example.com',
          'Subject: parent',
          `Message-ID: ${parentHeader}`,
          '',
          'p',
        ),
      ),
      'parent',
    );
    const references = Array.from({ length: 69_999 }, (_, i) => `<unknown-${i}@elsewhere.example>`);
    const res = await postRaw(
      rfc822(
        'From: s@example.org',
        'To: agent@example.com',
        `Subject: ${'s'.repeat(100_000)}`,
        `References: ${[...references, parentHeader].join('\r\n ')}`,
        '',
        'child',
      ),
    );
    const child = await getMessage(ingested(res, '70,000 references'));
    assert.equal(child.thread_id, (await getMessage(parent)).thread_id);
    assert.equal(child.subject, 's'.repeat(2000));
    // Too many header lines to check the sender (MAX_CHECKED_HEADER_LINES): permerror, not a stall.
    assert.deepEqual(child.authentication, { spf: 'none', dkim: 'permerror', dmarc: 'permerror', arc: 'permerror' });
    assert.equal(child.from_verified, false);
  });

  it('JSON nested 100,000 deep: REST 400 too_deeply_nested, /mcp a JSON-RPC -32600; 64 levels are fine', async () => {
    for (const path of ['/v1/tokens', '/v1/mailboxes', ingestPath(), `/v1/requests/chk_x/approve`]) {
      const res = await rest.raw('POST', path, nested(100_000), 'application/json');
      assertRefused(res, 400, 'invalid_request', 'too_deeply_nested', path);
    }
    const deepObject = '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000);
    assertRefused(
      await rest.raw('POST', '/v1/tokens', deepObject, 'application/json'),
      400,
      'invalid_request',
      'too_deeply_nested',
      'objects',
    );
    const mcp = await rawMcp(server.url, token.secret, nested(100_000));
    assert.equal(mcp.status, 400);
    assert.equal(mcp.json.jsonrpc, '2.0');
    assert.equal(mcp.json.error.code, -32600);

    // The limit is 64 levels: a body of 64 is an ordinary (wrong) body, 65 is too deep.
    const at = await server.admin.raw('POST', '/v1/tokens', `{"name":${nested(63)}}`, 'application/json');
    assertRefused(at, 400, 'invalid_request', 'invalid_field', '64 levels');
    const over = await server.admin.raw('POST', '/v1/tokens', `{"name":${nested(64)}}`, 'application/json');
    assertRefused(over, 400, 'invalid_request', 'too_deeply_nested', '65 levels');
    assert.equal((await server.admin.get('/v1/tokens')).status, 200, 'the server still serves');
  });

  it('MCP tool arguments with a NUL or a lone surrogate are a tool error invalid_characters naming the argument', async () => {
    for (const bad of UNSTORABLE) {
      const cases: [string, Record<string, unknown>, string][] = [
        ['request_approval', { mailbox_id: mailboxId, title: bad }, 'title'],
        ['request_approval', { mailbox_id: mailboxId, title: 'ok', details: bad }, 'details'],
        ['send_email', { mailbox_id: mailboxId, to: ['a@example.org'], subject: bad, text: 't' }, 'subject'],
        ['send_email', { mailbox_id: mailboxId, to: ['a@example.org'], subject: 's', text: bad }, 'text'],
        ['get_message', { message_id: `msg_${bad}` }, 'message_id'],
        ['get_request', { request_id: bad }, 'request_id'],
        ['cancel_request', { request_id: bad }, 'request_id'],
        ['list_messages', { mailbox_id: mailboxId, since_cursor: bad }, 'since_cursor'],
        ['monitor_inbox', { mailbox_id: mailboxId, from: bad, timeout_seconds: 0 }, 'from'],
        ['monitor_approval', { request_ids: ['chk_x', bad], timeout_seconds: 0 }, 'request_ids.1'],
        [
          'email_await',
          { event: { type: 'message_received', subject_contains: bad }, timeout_seconds: 0 },
          'event.subject_contains',
        ],
        ['email_await', { wait_id: bad, timeout_seconds: 0 }, 'wait_id'],
      ];
      for (const [tool, args, argument] of cases) {
        const err = await callError(agent, tool, args);
        const what = `${tool} ${JSON.stringify(args)}`;
        assert.equal(err.error, 'invalid_request', what);
        assert.equal(err.reason, 'invalid_characters', what);
        assert.equal(err.argument, argument, what);
      }
      const key = await callError(agent, 'list_mailboxes', { [bad]: 1 });
      assert.equal(key.reason, 'invalid_characters');
      assert.equal(key.argument, repaired(bad), 'the key, repaired, so it can be shown');
    }
    assert.equal(await count('SELECT count(*) AS n FROM approval_requests'), 1, 'only the earlier test request');
  });

  it('a task-augmented call with a NUL in its arguments becomes a failed task with that tool error', async () => {
    const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, subject_contains: 'x\u0000' });
    assert.equal(task.status, 'failed');
    const result = taskToolError(await taskResult(agent, task.taskId), task.taskId);
    assert.equal(result.reason, 'invalid_characters');
    assert.equal(result.argument, 'subject_contains');
  });

  it('tasks/get, tasks/cancel and tasks/result of an id with a NUL, and tasks/list of a forged cursor, are -32602', async () => {
    for (const taskId of ['\u0000', 'task_\u0000', 'a\ud800b', `task_${'a'.repeat(10_000)}`]) {
      for (const [name, run] of [
        ['tasks/get', () => agent.experimental.tasks.getTask(taskId)],
        ['tasks/cancel', () => agent.experimental.tasks.cancelTask(taskId)],
        ['tasks/result', () => taskResult(agent, taskId)],
      ] as const) {
        const data = await rejectsWith(
          run(),
          ErrorCode.InvalidParams,
          `${name} ${JSON.stringify(taskId.slice(0, 20))}`,
        );
        assert.equal(data.reason, 'task_not_found');
      }
    }
    const forged = (createdAt: unknown, id: unknown) =>
      `tc1.${Buffer.from(JSON.stringify([createdAt, id])).toString('base64url')}`;
    for (const cursor of [
      forged(new Date().toISOString(), 'task_\u0000'),
      forged(new Date().toISOString(), 'a\ud800'),
      forged('-200000-01-01T00:00:00Z', 'task_abc'),
      forged('+200000-01-01T00:00:00Z', 'task_abc'),
    ]) {
      const data = await rejectsWith(agent.experimental.tasks.listTasks(cursor), ErrorCode.InvalidParams, cursor);
      assert.equal(data.reason, 'invalid_cursor');
    }
    // The raw answer holds no database error text.
    const raw = await rawMcp(
      server.url,
      token.secret,
      { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: '\u0000' } },
      {
        'mcp-protocol-version': '2025-11-25',
      },
    );
    assert.equal(raw.json.error.code, ErrorCode.InvalidParams);
    assert.doesNotMatch(raw.text, /invalid byte sequence|syntax|UTF8|0x00/i);
    // And ordinary work goes on.
    await ingest(rest, mailboxId, { subject: 'still fine' });
  });
});
