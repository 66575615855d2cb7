import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { rawMcp, sseMessages } from '../support/mcp';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

const run = promisify(execFile);

/** The one JSON-RPC message (or JSON body) of an HTTP response body, SSE or not. */
function messageOf(body: string): any {
  return body.includes('data: ') ? sseMessages(body).find((m) => m.id !== undefined) : JSON.parse(body);
}

/**
 * Writes `requests` (raw HTTP/1.1, the last one with `Connection: close`) to one connection and
 * returns everything the server sent until it closed it: what a client without an HTTP library sees.
 */
function rawHttp(baseUrl: string, requests: string[]): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.write(requests.join(''));
  });
}

/** The responses in what rawHttp returned: status line, headers and body of each (Content-Length or chunked). */
function responses(raw: string): Array<{ status: number; headers: Record<string, string>; body: string }> {
  const out: Array<{ status: number; headers: Record<string, string>; body: string }> = [];
  let rest = raw;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    assert.ok(end > 0, `an incomplete response: ${JSON.stringify(rest.slice(0, 200))}`);
    const [statusLine, ...headerLines] = rest.slice(0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1]);
    assert.ok(status, `a status line: ${statusLine}`);
    const headers = Object.fromEntries(
      headerLines.map((line) => [
        line.slice(0, line.indexOf(':')).toLowerCase(),
        line.slice(line.indexOf(':') + 1).trim(),
      ]),
    );
    rest = rest.slice(end + 4);
    let body = '';
    if (headers['content-length'] !== undefined) {
      body = rest.slice(0, Number(headers['content-length']));
      rest = rest.slice(body.length);
    } else if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const lineEnd = rest.indexOf('\r\n');
        const size = parseInt(rest.slice(0, lineEnd), 16);
        rest = rest.slice(lineEnd + 2);
        if (size === 0) {
          rest = rest.slice(rest.indexOf('\r\n') + 2);
          break;
        }
        body += rest.slice(0, size);
        rest = rest.slice(size + 2);
      }
    }
    out.push({ status, headers, body });
  }
  return out;
}

const WEBSOCKET_OFFER =
  'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
/** What `curl --http2 http://…` sends (RFC 7540 3.2). */
const H2C_OFFER = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

/**
 * Odd requests: an `Upgrade` header on a path that is not a websocket endpoint is
 * ignored and the request answered normally over HTTP/1.1 (raw sockets and a real `curl --http2`),
 * while the websocket endpoint works as before; and the JSON-RPC error bodies of /mcp's HTTP
 * refusals carry the request's id whenever the body could be parsed.
 */
describe('odd requests', () => {
  let server: TestServer;
  let host: string;
  let agentSecret: string;
  /** Used only to run out of requests (the rate limit is per credential). */
  let limitedSecret: string;

  before(async () => {
    server = await startTestServer({
      // Five requests a second, bursts of ten: the other tokens make fewer.
      env: { ALCARTA_RATE_LIMIT_PER_SECOND: '5', ALCARTA_MAX_BODY_BYTES: '4096' },
    });
    host = new URL(server.url).host;
    const mailboxId = await createMailbox(server.admin);
    agentSecret = (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] })).secret;
    limitedSecret = (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] })).secret;
  });

  after(async () => {
    await server?.close();
  });

  const toolsList = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list' });
  const mcpPost = (id: number, offer: string, connection = '') =>
    `POST /mcp HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${agentSecret}\r\n` +
    `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
    `MCP-Protocol-Version: 2025-11-25\r\n${offer}${connection}Content-Length: ${toolsList(id).length}\r\n\r\n${toolsList(id)}`;

  it('answers /health/live, /mcp and a REST path normally when they offer a websocket upgrade', async () => {
    const health = responses(
      await rawHttp(server.url, [
        `GET /health/live HTTP/1.1\r\nHost: ${host}\r\n${WEBSOCKET_OFFER}\r\n`.replace(
          'Connection: Upgrade',
          'Connection: Upgrade, close',
        ),
      ]),
    );
    assert.equal(health.length, 1);
    assert.equal(health[0].status, 200, health[0].body);
    assert.equal(JSON.parse(health[0].body).status, 'ok');

    // Offer, body and keep-alive: the next request on the connection is served too.
    const [mcp, rest] = responses(
      await rawHttp(server.url, [
        mcpPost(7, WEBSOCKET_OFFER),
        `GET /v1/mailboxes HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.adminToken}\r\n` +
          `${WEBSOCKET_OFFER.replace('Connection: Upgrade', 'Connection: Upgrade, close')}\r\n`,
      ]),
    );
    assert.equal(mcp.status, 200, mcp.body);
    const listed = messageOf(mcp.body);
    assert.equal(listed.id, 7);
    assert.ok(Array.isArray(listed.result?.tools), mcp.body);
    assert.equal(rest.status, 200, rest.body);
    assert.ok(Array.isArray(JSON.parse(rest.body).mailboxes));
  });

  it('serves many offers in a row on one connection, pipelined', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const count = 15;
      const requests = Array.from(
        { length: count },
        (_, i) =>
          `GET /health/live HTTP/1.1\r\nHost: ${host}\r\n` +
          `${i === count - 1 ? WEBSOCKET_OFFER.replace('Connection: Upgrade', 'Connection: Upgrade, close') : WEBSOCKET_OFFER}\r\n`,
      );
      const answers = responses(await rawHttp(server.url, requests));
      assert.deepEqual(
        answers.map((a) => a.status),
        Array.from({ length: count }, () => 200),
      );
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepEqual(
      warnings.map((w) => `${w.name}: ${w.message}`),
      [],
    );
  });

  it(
    'answers an h2c upgrade offer (what curl --http2 sends) over HTTP/1.1',
    { skip: requireSystemPackage('curl') },
    async () => {
      // The /mcp answer (an SSE stream) asks to keep the connection: the last request closes it.
      const [mcp, health] = responses(
        await rawHttp(server.url, [
          mcpPost(8, H2C_OFFER),
          `GET /health/live HTTP/1.1\r\nHost: ${host}\r\n` +
            `${H2C_OFFER.replace('Connection: Upgrade, HTTP2-Settings', 'Connection: Upgrade, HTTP2-Settings, close')}\r\n`,
        ]),
      );
      assert.equal(health.status, 200, health.body);
      assert.equal(mcp.status, 200, mcp.body);
      assert.equal(messageOf(mcp.body).id, 8);

      const curl = async (...args: string[]) =>
        (await run('curl', ['--http2', '--silent', '--show-error', '--include', '--max-time', '10', ...args])).stdout;
      const live = await curl(`${server.url}/health/live`);
      assert.match(live, /^HTTP\/1\.1 200 /, live);
      const listed = await curl(
        '-X',
        'POST',
        '-H',
        `Authorization: Bearer ${agentSecret}`,
        '-H',
        'Content-Type: application/json',
        '-H',
        'Accept: application/json, text/event-stream',
        '--data',
        toolsList(9),
        `${server.url}/mcp`,
      );
      assert.match(listed, /^HTTP\/1\.1 200 /, listed);
      assert.equal(messageOf(listed.slice(listed.indexOf('\r\n\r\n') + 4)).id, 9);
    },
  );

  it('keeps the websocket endpoint as it was', async () => {
    const plain = await fetch(`${server.url}/v1/waits/ws?ticket=wst_unused`);
    assert.equal(plain.status, 400);
    assert.equal(((await plain.json()) as { reason?: string }).reason, 'upgrade_required');
    const [refused] = responses(
      await rawHttp(server.url, [
        `GET /v1/waits/ws?ticket=wst_bogus HTTP/1.1\r\nHost: ${host}\r\n${WEBSOCKET_OFFER}\r\n`,
      ]),
    );
    assert.equal(refused.status, 401, 'the handshake went to the websocket gateway, which refused the ticket');
    assert.equal(JSON.parse(refused.body).reason, 'ticket_invalid');
  });

  it("carries the request's id in the JSON-RPC body of /mcp's HTTP refusals whenever it could be read", async () => {
    const deep = { jsonrpc: '2.0', id: 'deep-1', method: 'tools/list', params: { _meta: {} as object } };
    let level = deep.params._meta as Record<string, unknown>;
    for (let i = 0; i < 200; i++) level = level.x = {};
    const tooDeep = await rawMcp(server.url, agentSecret, deep);
    assert.equal(tooDeep.status, 400, tooDeep.text);
    assert.equal(tooDeep.json?.id, 'deep-1', tooDeep.text);

    const unsupported = await rawMcp(server.url, agentSecret, JSON.parse(toolsList(11)), {
      'mcp-protocol-version': '1999-01-01',
    });
    assert.equal(unsupported.status, 400, unsupported.text);
    assert.equal(unsupported.json?.id, 11, unsupported.text);

    // Unparsable or unread bodies have no id to answer to.
    const malformed = await rawMcp(server.url, agentSecret, '{"jsonrpc": "2.0", "id": 12,');
    assert.equal(malformed.status, 400);
    assert.equal(malformed.json?.id, null, malformed.text);
    const tooLarge = await rawMcp(server.url, agentSecret, {
      jsonrpc: '2.0',
      id: 13,
      method: 'tools/list',
      params: { _meta: { padding: 'x'.repeat(5000) } },
    });
    assert.equal(tooLarge.status, 413);
    assert.equal(tooLarge.json?.id, null, tooLarge.text);

    // The limited credential runs out within a burst: the refusal answers the request that was refused.
    let limited: { id: number; res: Awaited<ReturnType<typeof rawMcp>> } | undefined;
    for (let id = 100; id < 140 && limited?.res.status !== 429; id++) {
      limited = { id, res: await rawMcp(server.url, limitedSecret, JSON.parse(toolsList(id))) };
    }
    assert.equal(limited?.res.status, 429, limited?.res.text);
    assert.ok(Number(limited.res.headers.get('retry-after')) > 0, 'Retry-After');
    assert.equal(limited.res.json?.id, limited.id, limited.res.text);
    const batch = await rawMcp(server.url, limitedSecret, [JSON.parse(toolsList(120)), JSON.parse(toolsList(121))]);
    assert.equal(batch.status, 429, batch.text);
    assert.equal(batch.json?.id, null, `a batch has no single id: ${batch.text}`);
  });
});
