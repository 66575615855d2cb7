import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callError, callOk, connectMcp, rawMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';

const LATEST = { 'mcp-protocol-version': '2025-11-25' };

const request = (method: string, params?: unknown, id: number | string = 1) => ({
  jsonrpc: '2.0',
  id,
  method,
  ...(params === undefined ? {} : { params }),
});

/** Asserts a short `-32602 Invalid params: …` naming `path`, without any validator output. */
function assertInvalidParams(error: { code: number; message: string } | undefined, path: string, what: string): void {
  assert.ok(error, `${what}: no error`);
  assert.equal(error.code, -32602, `${what}: ${error.message}`);
  assert.match(error.message, /^Invalid params: /, what);
  assert.ok(error.message.includes(path), `${what}: "${error.message}" does not name ${path}`);
  assert.ok(error.message.length < 400, `${what}: message too long (${error.message.length})`);
  assert.doesNotMatch(error.message, /[[{]\s*"/, `${what}: the message carries validator JSON: ${error.message}`);
}

/**
 * docs/operators.md "Limits and hardening" on the MCP endpoint: invalid JSON-RPC params are -32602
 * with a short message (never -32603 with a zod dump), a task ttl must be a positive integer, the
 * combination of email_await's flat `event` is checked by the server, and a large result is not
 * repeated in its text item.
 */
describe('MCP endpoint hardening', () => {
  let server: TestServer;
  let token: string;
  let mailbox: string;
  let agent: Client;

  before(async () => {
    server = await startTestServer();
    mailbox = await createMailbox(server.admin);
    token = (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailbox] })).secret;
    agent = await connectMcp(server.url, token);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  describe('invalid JSON-RPC params', () => {
    const cases: Array<[string, unknown, string, Record<string, string>?]> = [
      [
        'tools/call arguments null',
        request('tools/call', { name: 'list_mailboxes', arguments: null }),
        'params.arguments',
      ],
      ['tools/call name 5', request('tools/call', { name: 5, arguments: {} }), 'params.name'],
      ['tools/call params {}', request('tools/call', {}), 'params.name'],
      ['tools/call without params', request('tools/call'), 'params'],
      [
        'task.ttl "30"',
        request('tools/call', { name: 'email_await', arguments: {}, task: { ttl: '30' } }),
        'params.task.ttl',
        LATEST,
      ],
      [
        'initialize protocolVersion 5',
        request('initialize', { protocolVersion: 5, capabilities: {}, clientInfo: { name: 'x', version: '1' } }),
        'params.protocolVersion',
      ],
      ['initialize params {}', request('initialize', {}), 'params'],
      ['tools/list cursor 5', request('tools/list', { cursor: 5 }), 'params.cursor', LATEST],
      ['tasks/get taskId 5', request('tasks/get', { taskId: 5 }), 'params.taskId', LATEST],
      ['tasks/get params {}', request('tasks/get', {}), 'params.taskId', LATEST],
      ['tasks/result taskId null', request('tasks/result', { taskId: null }), 'params.taskId', LATEST],
      ['tasks/cancel without params', request('tasks/cancel'), 'params', LATEST],
      ['tasks/list cursor {}', request('tasks/list', { cursor: {} }), 'params.cursor', LATEST],
    ];

    for (const [what, body, path, headers] of cases) {
      it(`${what} → -32602`, async () => {
        const res = await rawMcp(server.url, token, body, headers);
        assert.equal(res.status, 200, `${what}: HTTP ${res.status} ${res.text}`);
        assertInvalidParams(res.json?.error, path, what);
        assert.equal(res.json.id, 1);
      });
    }

    it('answers each bad request of a batch with -32602 and runs the good ones', async () => {
      const res = await rawMcp(
        server.url,
        token,
        [
          request('tools/call', { name: 'list_mailboxes', arguments: null }, 'bad-1'),
          request('tools/list', {}, 'good'),
          request('tasks/get', { taskId: 7 }, 'bad-2'),
        ],
        LATEST,
      );
      assert.equal(res.status, 200);
      const messages = res.text
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6)) as { id: string; error?: { code: number; message: string }; result?: any });
      const byId = new Map(messages.map((m) => [m.id, m]));
      assertInvalidParams(byId.get('bad-1')?.error, 'params.arguments', 'batch bad-1');
      assertInvalidParams(byId.get('bad-2')?.error, 'params.taskId', 'batch bad-2');
      assert.ok(byId.get('good')?.result?.tools?.length > 0, `batch good: ${JSON.stringify(byId.get('good'))}`);
    });

    it('no request shape reaches -32603', async () => {
      const shapes: unknown[] = [
        { jsonrpc: '2.0', method: 'notifications/unknown', params: { x: 1 } },
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: {} } },
        { jsonrpc: '2.0', method: 'notifications/cancelled' },
        { jsonrpc: '2.0', method: 'notifications/initialized', params: { _meta: 5 } },
        request('tools/list', { cursor: null }),
        request('tools/list', { _meta: 'x' }),
        request('tools/call', { name: 'list_mailboxes', arguments: [] }),
        request('tools/call', { name: 'list_mailboxes', arguments: 'x' }),
        request('tools/call', { name: 'email_await', arguments: {}, task: null }),
        request('tools/call', { name: 'email_await', arguments: {}, task: { ttl: null } }),
        request('tools/call', { name: 'nope', arguments: {} }),
        request('ping', { _meta: [] }),
        request('unknown/method', { a: 1 }),
        request('tasks/get', { taskId: '' }),
        request('tasks/get', { taskId: 'x'.repeat(10_000) }),
        request('tasks/result', { taskId: ['x'] }),
        request('tasks/list', { cursor: 'not-a-cursor' }),
        request('tasks/cancel', { taskId: true }),
        request('resources/list', {}),
        [request('tools/list', 5)],
        [],
      ];
      for (const headers of [{}, LATEST, { 'mcp-protocol-version': '2025-06-18' }]) {
        for (const body of shapes) {
          const res = await rawMcp(server.url, token, body, headers);
          const what = `${JSON.stringify(body).slice(0, 120)} at ${JSON.stringify(headers)}`;
          assert.ok(res.status < 500, `${what}: HTTP ${res.status}`);
          assert.doesNotMatch(res.text, /-32603/, `${what}: ${res.text.slice(0, 300)}`);
          assert.doesNotMatch(res.text, /"code":\s*"invalid_type"|ZodError/, `${what}: a validator dump`);
        }
      }
    });
  });

  describe('task ttl', () => {
    for (const ttl of [0, -1, 1e-7, 1.5, -3600_000]) {
      it(`refuses ttl ${ttl} with -32602 and starts no task`, async () => {
        const res = await rawMcp(
          server.url,
          token,
          request('tools/call', {
            name: 'monitor_inbox',
            arguments: { mailbox_id: mailbox, timeout_seconds: 60 },
            task: { ttl },
          }),
          LATEST,
        );
        assertInvalidParams(res.json?.error, 'params.task.ttl', `ttl ${ttl}`);
        const listed = await rawMcp(server.url, token, request('tasks/list', {}, 2), LATEST);
        assert.deepEqual(listed.json.result.tasks, [], 'no task was created');
      });
    }

    it('accepts a positive integer ttl', async () => {
      const res = await rawMcp(
        server.url,
        token,
        request('tools/call', {
          name: 'monitor_inbox',
          arguments: { mailbox_id: mailbox, timeout_seconds: 1 },
          task: { ttl: 60_000 },
        }),
        LATEST,
      );
      assert.equal(res.json?.result?.task?.ttl, 60_000, res.text);
      await rawMcp(server.url, token, request('tasks/cancel', { taskId: res.json.result.task.taskId }, 3), LATEST);
    });
  });

  describe('a task that fails at once, through callToolStream (the README example)', () => {
    it('ends the stream with an error message; tasks/result then returns the tool error', async () => {
      const stream = agent.experimental.tasks.callToolStream(
        {
          name: 'email_await',
          arguments: { event: { type: 'message_received', mailbox_id: mailbox }, delivery: 'websocket' },
        },
        CallToolResultSchema,
        { task: { ttl: 60_000 } },
      );
      let taskId: string | undefined;
      const seen: string[] = [];
      let failure: unknown;
      for await (const message of stream) {
        seen.push(message.type);
        if (message.type === 'taskCreated') taskId = message.task.taskId;
        if (message.type === 'error') {
          const failed = await agent.experimental.tasks.getTaskResult(taskId!, CallToolResultSchema);
          assert.equal(failed.isError, true);
          failure = failed.structuredContent;
        }
      }
      assert.deepEqual([seen[0], seen[seen.length - 1]], ['taskCreated', 'error'], seen.join(', '));
      assert.deepEqual(
        [(failure as { error: string }).error, (failure as { reason: string }).reason],
        ['invalid_request', 'delivery_not_supported_with_task'],
      );
    });
  });

  describe("email_await's flat event", () => {
    it('runs message waits and request waits with the one event object', async () => {
      const message = await callOk(agent, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailbox },
        timeout_seconds: 0,
      });
      assert.equal(message.timed_out, true);
      assert.equal(typeof message.next_cursor, 'string');
      const request = await callOk(agent, 'request_approval', {
        mailbox_id: mailbox,
        title: 'Pay the invoice',
      });
      const requestWait = await callOk(agent, 'email_await', {
        event: { type: 'request_state_changed', request_ids: [request.request_id], states: ['pending'] },
        timeout_seconds: 0,
      });
      assert.equal(requestWait.matched, true);
    });

    it('refuses fields of the other kind and a request wait without request_ids, naming the argument', async () => {
      const cases: Array<[Record<string, unknown>, string, string]> = [
        [{ type: 'message_received', request_ids: ['chk_x'] }, 'conflicting_arguments', 'event.request_ids'],
        [{ type: 'message_received', states: ['approved'] }, 'conflicting_arguments', 'event.states'],
        [
          { type: 'request_state_changed', request_ids: ['chk_x'], mailbox_id: mailbox },
          'conflicting_arguments',
          'event.mailbox_id',
        ],
        [
          { type: 'request_state_changed', request_ids: ['chk_x'], from: 'a@b.c' },
          'conflicting_arguments',
          'event.from',
        ],
        [{ type: 'request_state_changed', subject_contains: 'x' }, 'conflicting_arguments', 'event.subject_contains'],
        [{ type: 'request_state_changed' }, 'missing_argument', 'event.request_ids'],
        [{ type: 'request_state_changed', states: ['approved'] }, 'missing_argument', 'event.request_ids'],
      ];
      for (const [event, reason, argument] of cases) {
        for (const extra of [{}, { delivery: 'websocket' }]) {
          const err = await callError(agent, 'email_await', { event, timeout_seconds: 0, ...extra });
          const what = JSON.stringify({ event, ...extra });
          assert.deepEqual([err.error, err.reason, err.argument], ['invalid_request', reason, argument], what);
          assert.ok(err.message.includes(argument), `${what}: ${err.message}`);
        }
      }
    });
  });

  describe('large results', () => {
    it('get_message of a 20 MiB message sends it once: the text item is a short abridged note', async () => {
      const text = 'The quick brown fox jumps over the lazy dog. '.repeat(Math.ceil((20 * 1024 * 1024) / 45));
      const html = `<p>${'x'.repeat(100_000)}</p>`;
      const id = await ingest(server.admin, mailbox, { subject: 'A very large message', text, html });

      const result = (await agent.callTool({ name: 'get_message', arguments: { message_id: id } })) as CallToolResult;
      const message = result.structuredContent as { text: string; html: string; subject: string };
      assert.equal(message.text.length, text.length, 'structuredContent has the whole text');
      assert.equal(message.html, html);
      assert.equal(result.content.length, 1);
      const item = (result.content[0] as { text: string }).text;
      assert.ok(item.length < 16 * 1024, `the text item has ${item.length} characters`);
      assert.match(item, /structuredContent/);
      assert.ok(item.includes('A very large message'), 'the text item keeps the short fields');
      assert.ok(item.includes(id));
      assert.ok(item.includes(text.slice(0, 1000)), 'the text item keeps the beginning of the text');

      const raw = await rawMcp(
        server.url,
        token,
        request('tools/call', { name: 'get_message', arguments: { message_id: id } }),
        LATEST,
      );
      assert.equal(raw.status, 200);
      const total = Buffer.byteLength(raw.text);
      assert.ok(total < text.length * 1.1, `the response has ${total} bytes for a ${text.length}-byte text`);
    });

    it('small results keep the whole JSON as their text item', async () => {
      const id = await ingest(server.admin, mailbox, { subject: 'small', text: 'short' });
      await callOk(agent, 'get_message', { message_id: id });
    });
  });
});
