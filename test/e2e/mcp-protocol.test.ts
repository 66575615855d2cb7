import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callError, callOk, connectMcp, rawMcp } from '../support/mcp';
import { createMailbox, createToken, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const MAX_BODY_BYTES = 8192;
const TOOL_ERROR_CODES = ['invalid_request', 'not_found', 'conflict', 'limit_exceeded'];

function initialize(protocolVersion: string, id = 1) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw-test', version: '1.0.0' } },
  };
}

const toolsList = (id = 2, params: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/list',
  params,
});

/**
 * docs/agents.md "Tools": the stateless Streamable HTTP endpoint at protocol level — revision
 * negotiation, HTTP statuses, JSON-RPC error codes, Origin checks and authentication — through the
 * official SDK client where an agent would use it, and raw JSON-RPC where the SDK would not go.
 */
describe('MCP endpoint protocol behaviour', () => {
  let server: TestServer;
  let client: Client;
  let token: string;
  /** Every raw response of this file, to check that none opens a session. */
  const seen: Array<{ what: string; headers: Headers }> = [];
  const raw = async (what: string, body: unknown, headers: Record<string, string> = {}, secret = token) => {
    const res = await rawMcp(server.url, secret, body, headers);
    seen.push({ what, headers: res.headers });
    return res;
  };

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_MAX_BODY_BYTES: String(MAX_BODY_BYTES) } });
    token = server.adminToken;
    client = await connectMcp(server.url, token);
  });

  after(async () => {
    await client?.close();
    await server?.close();
  });

  describe('through the SDK client', () => {
    it('negotiates 2025-11-25 and identifies the server', () => {
      const transport = client.transport as StreamableHTTPClientTransport;
      assert.equal(transport.protocolVersion, '2025-11-25');
      assert.equal(client.getServerVersion()?.name, 'alcarta');
      assert.equal(transport.sessionId, undefined, 'a stateless server hands out no session id');
    });

    it('lists tools, each with a description and an object inputSchema', async () => {
      const { tools } = await client.listTools();
      assert.ok(tools.length > 0);
      for (const tool of tools) {
        assert.equal(typeof tool.description, 'string', `${tool.name} has no description`);
        assert.ok(tool.description!.length > 20, `${tool.name} has no real description`);
        assert.equal(tool.inputSchema.type, 'object', `${tool.name}: inputSchema is not an object schema`);
      }
      assert.ok(tools.some((t) => t.name === 'list_mailboxes'));
    });

    it('every tool result, success or error, has structuredContent mirrored as JSON text', async () => {
      const { tools } = await client.listTools();
      for (const tool of tools) {
        // Wait tools get a zero timeout so that none blocks; other tools get no arguments.
        const args = tool.inputSchema.properties?.timeout_seconds ? { timeout_seconds: 0 } : {};
        const result = (await client.callTool({ name: tool.name, arguments: args })) as CallToolResult;
        assert.ok(result.structuredContent, `${tool.name} returned no structuredContent`);
        const text = result.content.find((c) => c.type === 'text');
        assert.ok(text && text.type === 'text', `${tool.name} returned no text content`);
        assert.deepEqual(JSON.parse(text.text), result.structuredContent, `${tool.name}: text differs`);
        if (result.isError) assert.ok(TOOL_ERROR_CODES.includes(result.structuredContent.error as string));
      }
    });

    it('successful calls of the mail and approval tools mirror their results too', async () => {
      const mailboxId = await createMailbox(server.admin);
      const { mailboxes } = await callOk(client, 'list_mailboxes');
      assert.ok(mailboxes.some((m: { mailbox_id: string }) => m.mailbox_id === mailboxId));
      await callOk(client, 'list_messages', { mailbox_id: mailboxId });
      const check = await callOk(client, 'request_approval', { mailbox_id: mailboxId, title: 'Deploy?' });
      assert.equal(check.state, 'pending');
      await callOk(client, 'get_request', { request_id: check.request_id });
      assert.equal((await callOk(client, 'cancel_request', { request_id: check.request_id })).state, 'cancelled');
      const unknown = await callError(client, 'get_message', { message_id: 'msg_doesnotexist' });
      assert.equal(unknown.error, 'not_found');
    });
  });

  describe('revision negotiation (raw JSON-RPC)', () => {
    for (const version of ['2025-11-25', '2025-06-18', '2025-03-26']) {
      it(`initialize at ${version} is answered with ${version}`, async () => {
        const res = await raw(`initialize ${version}`, initialize(version));
        assert.equal(res.status, 200);
        assert.equal(res.json.result.protocolVersion, version);
        assert.equal(res.json.result.serverInfo.name, 'alcarta');
      });
    }

    for (const version of ['2024-11-05', '1999-01-01']) {
      it(`initialize at unsupported ${version} is answered with the latest, 2025-11-25`, async () => {
        const res = await raw(`initialize ${version}`, initialize(version));
        assert.equal(res.status, 200);
        assert.equal(res.json.result.protocolVersion, '2025-11-25');
      });
    }

    it('tools/list works with MCP-Protocol-Version 2025-06-18 and without the header', async () => {
      for (const headers of [{ 'mcp-protocol-version': '2025-06-18' }, {}] as Record<string, string>[]) {
        const res = await raw('tools/list', toolsList(), headers);
        assert.equal(res.status, 200, JSON.stringify(headers));
        assert.ok(Array.isArray(res.json.result.tools));
        assert.ok(res.json.result.tools.length > 0);
      }
    });

    it('an unsupported MCP-Protocol-Version header is refused with HTTP 400', async () => {
      for (const version of ['2024-11-05', '1999-01-01']) {
        const res = await raw('tools/list unsupported', toolsList(), { 'mcp-protocol-version': version });
        assert.equal(res.status, 400, version);
      }
    });
  });

  describe('HTTP and JSON-RPC errors', () => {
    it('GET /mcp and DELETE /mcp answer 405', async () => {
      for (const method of ['GET', 'DELETE']) {
        const res = await fetch(`${server.url}/mcp`, { method, headers: { authorization: `Bearer ${token}` } });
        await res.text();
        assert.equal(res.status, 405, method);
      }
    });

    it('malformed JSON is JSON-RPC -32700', async () => {
      const res = await raw('malformed', '{"jsonrpc": "2.0", "id": 1, "method": ');
      assert.equal(res.json.error.code, -32700);
    });

    it('an unknown method is JSON-RPC -32601', async () => {
      const res = await raw('unknown method', { jsonrpc: '2.0', id: 7, method: 'mailboxes/explode', params: {} });
      assert.equal(res.json.id, 7);
      assert.equal(res.json.error.code, -32601);
    });

    it('a body over ALCARTA_MAX_BODY_BYTES is refused with 413; one below it is served', async () => {
      const padded = (bytes: number) => toolsList(3, { _meta: { padding: 'x'.repeat(bytes) } });
      const big = await raw('too large', padded(MAX_BODY_BYTES + 100));
      assert.equal(big.status, 413);
      const fits = await raw('fits', padded(MAX_BODY_BYTES - 500));
      assert.equal(fits.status, 200);
      assert.ok(Array.isArray(fits.json.result.tools));
    });

    it('invalid tool arguments are a tool result with isError and invalid_request, not a JSON-RPC error', async () => {
      const res = await raw('invalid args', {
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: 'get_message', arguments: { message_id: 42 } },
      });
      assert.equal(res.status, 200);
      assert.equal(res.json.error, undefined);
      assert.equal(res.json.result.isError, true);
      assert.equal(res.json.result.structuredContent.error, 'invalid_request');
      assert.equal(typeof res.json.result.structuredContent.reason, 'string');
    });

    it('an unknown tool is JSON-RPC -32602', async () => {
      const res = await raw('unknown tool', {
        jsonrpc: '2.0',
        id: 5,
        method: 'tools/call',
        params: { name: 'launch_rockets', arguments: {} },
      });
      assert.equal(res.json.error.code, -32602);
    });
  });

  describe('Origin check (DNS rebinding protection)', () => {
    const listWithOrigin = (url: string, origin: string | undefined) =>
      rawMcp(url, token, toolsList(), origin === undefined ? {} : { origin });

    it('allows requests without Origin and from loopback origins on any port', async () => {
      for (const origin of [undefined, 'http://localhost:1234', 'http://127.0.0.1:9', 'http://[::1]:5000']) {
        const res = await listWithOrigin(server.url, origin);
        assert.equal(res.status, 200, `origin ${origin}`);
        assert.ok(Array.isArray(res.json.result.tools));
      }
    });

    it('refuses other origins with 403', async () => {
      for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'null']) {
        const res = await listWithOrigin(server.url, origin);
        assert.equal(res.status, 403, `origin ${origin}`);
      }
    });

    it('allows the origins listed in ALCARTA_ALLOWED_ORIGINS, and only those', async () => {
      const second = await startTestServer({
        db: server.db,
        adminToken: server.adminToken,
        env: { ALCARTA_ALLOWED_ORIGINS: 'https://console.example.com, https://ops.example.com:8443' },
      });
      try {
        for (const origin of ['https://console.example.com', 'https://ops.example.com:8443', 'http://localhost:3000']) {
          assert.equal((await listWithOrigin(second.url, origin)).status, 200, `origin ${origin}`);
        }
        for (const origin of ['https://evil.example', 'http://console.example.com', 'https://ops.example.com']) {
          assert.equal((await listWithOrigin(second.url, origin)).status, 403, `origin ${origin}`);
        }
        // The first server, without the setting, still refuses them.
        assert.equal((await listWithOrigin(server.url, 'https://console.example.com')).status, 403);
      } finally {
        await second.close({ keepDatabase: true });
      }
    });
  });

  describe('authentication', () => {
    const assertUnauthorized = (res: { status: number; headers: Headers; json: any }, what: string) => {
      assert.equal(res.status, 401, what);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="alcarta"', what);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what);
      assert.equal(res.json?.error, 'unauthorized', what);
    };

    it('401 with WWW-Authenticate and a JSON body without a token or with a bad one', async () => {
      assertUnauthorized(await raw('no token', toolsList(), {}, ''), 'no token');
      assertUnauthorized(await raw('unknown token', toolsList(), {}, randomSecret()), 'unknown token');
      assertUnauthorized(await raw('garbage', toolsList(), {}, 'not-a-token'), 'garbage token');
      assertUnauthorized(
        await raw('basic', toolsList(), { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, ''),
        'basic auth',
      );
    });

    it('401 for a revoked and for an expired token', async () => {
      const revoked = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
      assert.equal((await raw('before revoke', toolsList(), {}, revoked.secret)).status, 200);
      assert.equal((await server.admin.delete(`/v1/tokens/${revoked.id}`)).status, 204);
      assertUnauthorized(await raw('revoked', toolsList(), {}, revoked.secret), 'revoked token');

      const expiring = await createToken(server.admin, {
        scopes: ['mail:read'],
        mailboxes: ['*'],
        expires_at: new Date(Date.now() + 3000).toISOString(),
      });
      await waitFor(
        'the token to expire',
        async () => (await raw('expiring', toolsList(), {}, expiring.secret)).status === 401,
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      assertUnauthorized(await raw('expired', toolsList(), {}, expiring.secret), 'expired token');
    });
  });

  it('no response carries an Mcp-Session-Id header (stateless)', () => {
    assert.ok(seen.length > 10);
    for (const { what, headers } of seen) assert.equal(headers.get('mcp-session-id'), null, what);
  });
});
