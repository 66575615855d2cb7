import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client as Client2026, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callOk2026, connectMcp2026, envelope, MODERN, revision2026Headers } from '../support/mcp-2026';
import { callError, callOk, connectMcp, rawMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, ingest, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** The keep-alive (and so progress) interval of the server under test: 1 s instead of the default. */
const KEEPALIVE_SECONDS = 1;
/** How long a woken or cancelled wait may take to leave the metrics: the doorbell goes through PostgreSQL. */
const FREED_WITHIN_MS = 5000;

/** A raw 2026-07-28 request: the `_meta` envelope in params and the standard headers. */
const modernRequest = (id: number, method: string, params: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method,
  params: { ...params, _meta: envelope() },
});

/**
 * docs/agents.md "Protocol revisions" with the official v2 client (`@modelcontextprotocol/client`,
 * pinned to 2026-07-28) against a real server: server/discover, the same tool catalog as
 * 2025-11-25, the blocking waits (woken, with progress past the client's request timeout, cancelled
 * by closing the stream), the revision's error codes on the wire, and 2025-era clients beside it on
 * the same server.
 */
describe('MCP 2026-07-28 with the official v2 client', () => {
  let server: TestServer;
  let mailbox: string;
  let token: string;
  let agent: Client2026;
  let agent2025: Client;

  const parked = (n: number, kind?: 'message' | 'request') =>
    waitFor(`${n} parked wait(s)`, async () => (await activeWaits(server.url, kind)) === n, {
      timeoutMs: FREED_WITHIN_MS,
    });

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_KEEPALIVE_SECONDS: String(KEEPALIVE_SECONDS) } });
    mailbox = await createMailbox(server.admin);
    token = (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailbox] })).secret;
    agent = await connectMcp2026(server.url, token);
    agent2025 = await connectMcp(server.url, token);
  });

  after(async () => {
    await agent?.close();
    await agent2025?.close();
    await server?.close();
  });

  describe('server/discover and tools/list', () => {
    it('discovers the server: supported versions, capabilities, instructions, serverInfo in _meta', async () => {
      const discover = agent.getDiscoverResult();
      assert.ok(discover, 'the v2 client probes with server/discover');
      assert.deepEqual(discover.supportedVersions, [MODERN]);
      assert.deepEqual(discover.capabilities.tools, { listChanged: false });
      assert.equal(typeof discover.instructions, 'string');
      assert.equal(agent.getServerVersion()?.name, 'alcarta');

      const raw = await rawMcp(
        server.url,
        token,
        modernRequest(1, 'server/discover'),
        revision2026Headers('server/discover'),
      );
      assert.equal(raw.status, 200, raw.text);
      assert.equal(raw.json.result.resultType, 'complete');
      assert.deepEqual(raw.json.result.supportedVersions, [MODERN]);
      assert.equal(raw.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'alcarta');
      assert.equal(raw.json.result.ttlMs, 300_000);
      assert.equal(raw.json.result.cacheScope, 'private');
    });

    it('lists the same tools as 2025-11-25 for the same token, in the same order, every time', async () => {
      const modern = (await agent.listTools()).tools;
      const again = (await agent.listTools()).tools;
      const old = (await agent2025.listTools()).tools;
      assert.deepEqual(
        modern.map((t) => t.name),
        old.map((t) => t.name),
      );
      assert.deepEqual(
        again.map((t) => t.name),
        modern.map((t) => t.name),
      );
      for (const tool of modern) {
        const before2026 = old.find((t) => t.name === tool.name)!;
        assert.deepEqual(tool.inputSchema, before2026.inputSchema, `${tool.name}: inputSchema`);
        assert.deepEqual(tool.outputSchema, before2026.outputSchema, `${tool.name}: outputSchema`);
        assert.equal(tool.description, before2026.description, `${tool.name}: description`);
      }
      // mail:read + approvals:read: no send_email (mail:send).
      assert.ok(modern.some((t) => t.name === 'email_await'));
      assert.ok(!modern.some((t) => t.name === 'send_email'));
    });

    it('marks tools/list private to the token (its scopes decide it), fresh for 5 minutes', async () => {
      const raw = await rawMcp(server.url, token, modernRequest(2, 'tools/list'), revision2026Headers('tools/list'));
      assert.equal(raw.status, 200, raw.text);
      assert.equal(raw.json.result.resultType, 'complete');
      assert.equal(raw.json.result.cacheScope, 'private');
      assert.equal(raw.json.result.ttlMs, 300_000);
    });
  });

  describe('tool calls', () => {
    it('calls list_mailboxes, list_messages, get_message and request_approval like at 2025-11-25', async () => {
      const mailboxes = await callOk2026(agent, 'list_mailboxes');
      assert.deepEqual(
        mailboxes.mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id),
        [mailbox],
      );
      const messageId = await ingest(server.admin, mailbox, { subject: 'Listed at 2026-07-28' });
      const listed = await callOk2026(agent, 'list_messages', { mailbox_id: mailbox });
      assert.ok(listed.messages.some((m: { message_id: string }) => m.message_id === messageId));
      const message = await callOk2026(agent, 'get_message', { message_id: messageId });
      assert.equal(message.subject, 'Listed at 2026-07-28');
      assert.deepEqual(message, await callOk(agent2025, 'get_message', { message_id: messageId }));

      const request = await callOk2026(agent, 'request_approval', { mailbox_id: mailbox, title: 'Ship 4.2' });
      assert.equal(request.state, 'pending');
      assert.equal((await callOk2026(agent, 'get_request', { request_id: request.request_id })).title, 'Ship 4.2');
    });

    it('answers results with resultType "complete" on the wire', async () => {
      const raw = await rawMcp(
        server.url,
        token,
        modernRequest(3, 'tools/call', { name: 'list_mailboxes', arguments: {} }),
        revision2026Headers('tools/call', 'list_mailboxes'),
      );
      assert.equal(raw.status, 200, raw.text);
      assert.equal(raw.json.result.resultType, 'complete');
      assert.equal(raw.json.result.isError, undefined);
      assert.deepEqual(raw.json.result.structuredContent.mailboxes.length, 1);
    });

    it('reports an argument mistake as the same tool error (isError) as at 2025-11-25', async () => {
      for (const [name, args] of [
        ['get_message', { message_id: 'msg_doesNotExist' }],
        ['list_messages', { mailbox_id: mailbox, limit: 'many' }],
        ['get_request', {}],
      ] as const) {
        const modern = await agent.callTool({ name, arguments: args });
        assert.equal(modern.isError, true, `${name}: ${JSON.stringify(modern)}`);
        const old = await callError(agent2025, name, args);
        assert.deepEqual(modern.structuredContent, old, name);
      }
    });
  });

  describe('blocking waits', () => {
    it('email_await parks and is woken by an ingest', async () => {
      const call = callOk2026(agent, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailbox },
        timeout_seconds: 60,
      });
      await parked(1, 'message');
      const messageId = await ingest(server.admin, mailbox, { subject: 'Wake up' });
      const result = await call;
      assert.equal(result.matched, true);
      assert.ok(
        result.events.some((e: { message_id: string }) => e.message_id === messageId),
        JSON.stringify(result),
      );
      await parked(0, 'message');
    });

    it('monitor_approval is woken by a decision, with progress on the way, past the request timeout', async () => {
      const request = await callOk2026(agent, 'request_approval', { mailbox_id: mailbox, title: 'Decide me' });
      const progress: number[] = [];
      const call = agent.callTool(
        { name: 'monitor_approval', arguments: { request_id: request.request_id, timeout_seconds: 60 } },
        // Progress comes every second, so a 3 s request timeout is reset long before it fires.
        { timeout: 3000, resetTimeoutOnProgress: true, onprogress: (p) => progress.push(p.progress) },
      );
      await parked(1, 'request');
      // Outlast the client's request timeout before deciding.
      await waitFor('progress past the request timeout', () => progress.length >= 4, { timeoutMs: 15_000 });
      const res = await server.admin.post(`/v1/requests/${request.request_id}/approve`, { reason: 'tested' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const result = (await call) as CallToolResult;
      assert.notEqual(result.isError, true, JSON.stringify(result));
      const { requests } = result.structuredContent as { requests: Array<{ request_id: string; state: string }> };
      assert.deepEqual(
        requests.map((r) => [r.request_id, r.state]),
        [[request.request_id, 'approved']],
      );
      for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1], progress.join(', '));
      await parked(0, 'request');
    });

    it('without onprogress the same wait fails with the client request timeout, and the wait ends', async () => {
      await assert.rejects(
        agent.callTool(
          {
            name: 'email_await',
            arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 60 },
          },
          { timeout: 1500 },
        ),
      );
      await parked(0, 'message');
    });

    it('aborting the call (AbortSignal) closes its stream, which cancels the wait', async () => {
      const abort = new AbortController();
      const call = agent.callTool(
        {
          name: 'email_await',
          arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 120 },
        },
        { signal: abort.signal, timeout: 600_000 },
      );
      await parked(1, 'message');
      abort.abort('not needed any more');
      await assert.rejects(call);
      await parked(0, 'message');
    });

    it('a raw client closing the SSE response is the cancellation (no notifications/cancelled needed)', async () => {
      const abort = new AbortController();
      const res = await fetch(new URL('/mcp', server.url), {
        method: 'POST',
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${token}`,
          ...revision2026Headers('tools/call', 'email_await'),
        },
        body: JSON.stringify(
          modernRequest(4, 'tools/call', {
            name: 'email_await',
            arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 120 },
          }),
        ),
      });
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      await parked(1, 'message');
      abort.abort();
      await parked(0, 'message');
    });
  });

  describe('errors of the revision', () => {
    const listTools = modernRequest(10, 'tools/list');

    it('Mcp-Method / Mcp-Name headers missing or not matching the body: -32020 with HTTP 400', async () => {
      const cases: Array<[string, unknown, Record<string, string>]> = [
        ['no Mcp-Method', listTools, { 'mcp-protocol-version': MODERN }],
        ['Mcp-Method mismatch', listTools, revision2026Headers('prompts/list')],
        [
          'no Mcp-Name on tools/call',
          modernRequest(11, 'tools/call', { name: 'list_mailboxes', arguments: {} }),
          revision2026Headers('tools/call'),
        ],
        [
          'Mcp-Name mismatch',
          modernRequest(12, 'tools/call', { name: 'list_mailboxes', arguments: {} }),
          revision2026Headers('tools/call', 'email_await'),
        ],
      ];
      for (const [what, body, headers] of cases) {
        const raw = await rawMcp(server.url, token, body, headers);
        assert.equal(raw.status, 400, `${what}: ${raw.text}`);
        assert.equal(raw.json?.error?.code, -32020, `${what}: ${raw.text}`);
      }
    });

    it('a request without the _meta envelope: -32602', async () => {
      const raw = await rawMcp(
        server.url,
        token,
        { jsonrpc: '2.0', id: 13, method: 'tools/list', params: {} },
        revision2026Headers('tools/list'),
      );
      assert.equal(raw.json?.error?.code, -32602, raw.text);
    });

    it('an unsupported revision in _meta: -32022 with the supported list', async () => {
      const raw = await rawMcp(
        server.url,
        token,
        {
          jsonrpc: '2.0',
          id: 14,
          method: 'tools/list',
          params: { _meta: { ...envelope(), 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } },
        },
        { ...revision2026Headers('tools/list'), 'mcp-protocol-version': '2099-01-01' },
      );
      assert.equal(raw.json?.error?.code, -32022, raw.text);
      assert.deepEqual(raw.json.error.data.supported, [MODERN]);
    });

    it('an unknown method: -32601 with HTTP 404', async () => {
      const raw = await rawMcp(
        server.url,
        token,
        modernRequest(15, 'prompts/list'),
        revision2026Headers('prompts/list'),
      );
      assert.equal(raw.status, 404, raw.text);
      assert.equal(raw.json?.error?.code, -32601, raw.text);
      // The v2 client reports the HTTP error with the JSON-RPC body.
      await assert.rejects(agent.request({ method: 'resources/list', params: {} }), /-32601/);
    });

    it('methods the revision removed (ping, logging/setLevel) are unknown: -32601', async () => {
      for (const [method, params] of [
        ['ping', {}],
        ['logging/setLevel', { level: 'info' }],
      ] as const) {
        const raw = await rawMcp(server.url, token, modernRequest(17, method, params), revision2026Headers(method));
        assert.equal(raw.json?.error?.code, -32601, `${method}: ${raw.text}`);
      }
    });

    it('no or an invalid bearer: 401 with the challenge, as at 2025-11-25', async () => {
      for (const bearer of [undefined, randomSecret()]) {
        const raw = await rawMcp(server.url, bearer, listTools, revision2026Headers('tools/list'));
        assert.equal(raw.status, 401, raw.text);
        assert.match(raw.headers.get('www-authenticate') ?? '', /^Bearer /);
      }
      await assert.rejects(connectMcp2026(server.url, randomSecret()));
    });
  });

  describe('beside the 2025 era', () => {
    it("a v2 client picks 2026-07-28 with 'auto' negotiation (discover first), 2025-11-25 with the default", async () => {
      for (const [mode, revision] of [
        ['auto', MODERN],
        [undefined, '2025-11-25'],
      ] as const) {
        const client = new Client2026(
          { name: 'negotiation', version: '1.0.0' },
          mode ? { versionNegotiation: { mode } } : {},
        );
        await client.connect(
          new StreamableHTTPClientTransport(new URL('/mcp', server.url), {
            requestInit: { headers: { authorization: `Bearer ${token}` } },
          }),
        );
        try {
          assert.equal(client.getNegotiatedProtocolVersion(), revision, `mode ${mode ?? 'default'}`);
          assert.deepEqual(await callOk2026(client, 'list_mailboxes'), await callOk(agent2025, 'list_mailboxes'));
        } finally {
          await client.close();
        }
      }
    });

    it('initialize at 2025-11-25 (SDK 1.x) and 2026-07-28 requests work side by side on one server', async () => {
      const old = await connectMcp(server.url, token);
      try {
        assert.equal(old.getServerVersion()?.name, 'alcarta');
        const [modern, before2026] = await Promise.all([
          callOk2026(agent, 'list_mailboxes'),
          callOk(old, 'list_mailboxes'),
        ]);
        assert.deepEqual(modern, before2026);
        const raw = await rawMcp(
          server.url,
          token,
          { jsonrpc: '2.0', id: 16, method: 'tools/list', params: {} },
          { 'mcp-protocol-version': '2025-11-25' },
        );
        assert.equal(raw.status, 200, raw.text);
        assert.equal(raw.json.result.resultType, undefined, 'no 2026-07-28 fields at 2025-11-25');
        assert.equal(raw.json.result.ttlMs, undefined);
      } finally {
        await old.close();
      }
    });
  });
});
