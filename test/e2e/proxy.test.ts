import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocket } from 'ws';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { NginxProxy, startNginx } from '../support/nginx';
import { requireSystemPackage } from '../support/system-packages';
import type { RestClient } from '../support/rest';
import { freePort } from '../support/spawned-server';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** Keep-alive interval of the server under test (SSE comments and websocket pings): 1 s. */
const KEEPALIVE_SECONDS = 1;

interface WaitDescriptor {
  delivery: string;
  wait_id: string;
  websocket_url: string;
  connect_deadline: string;
  expires_at: string;
}
interface MessageResult {
  matched: boolean;
  timed_out: boolean;
  shutdown: boolean;
  events: Array<{ type: string; message_id: string }>;
  next_cursor: string;
}

/** A websocket that opened: every frame it received (parsed), its pings, and how it closed. */
interface OpenSocket {
  frames: any[];
  pings(): number;
  closed: Promise<{ code: number; reason: string }>;
}

function openSocket(url: string): Promise<OpenSocket> {
  return new Promise((resolveOpen, reject) => {
    const ws = new WebSocket(url);
    const frames: any[] = [];
    let pings = 0;
    // Text frames arrive as one Buffer (the default binaryType).
    ws.on('message', (data) => frames.push(JSON.parse((data as Buffer).toString('utf8'))));
    ws.on('ping', () => pings++);
    const closed = new Promise<{ code: number; reason: string }>((resolveClose) =>
      ws.once('close', (code, reason) => resolveClose({ code, reason: String(reason) })),
    );
    ws.once('open', () => resolveOpen({ frames, pings: () => pings, closed }));
    ws.once('unexpected-response', (_req, res) => {
      ws.terminate();
      reject(new Error(`the websocket handshake was answered with HTTP ${res.statusCode}`));
    });
    ws.on('error', reject);
  });
}

/** A handshake that must be refused: the HTTP status, content type and JSON body of the refusal. */
function refusedHandshake(url: string): Promise<{ status: number; contentType: string; body: any }> {
  return new Promise((resolveRefusal, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => {
      ws.close();
      reject(new Error('the websocket handshake succeeded'));
    });
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        ws.on('error', () => undefined); // aborting the handshake reports an error: expected
        ws.terminate();
        try {
          resolveRefusal({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type']),
            body: JSON.parse(text),
          });
        } catch {
          reject(new Error(`the refusal (HTTP ${res.statusCode}) is not JSON: ${text.slice(0, 200)}`));
        }
      });
    });
    ws.once('error', reject);
  });
}

/** `url` with its origin replaced by `base`'s (same path and ticket, another hop). */
function via(url: string, base: string): string {
  const target = new URL(url);
  target.host = new URL(base).host;
  return target.toString();
}

/**
 * "Proxies" (docs/agents.md, "Waits") with a real nginx hop between the clients and Alcarta.
 * Through a hop configured as the spec asks (Upgrade/Connection forwarded, buffering off):
 * websocket delivery end to end, an SSE long poll that blocks and is woken, and `: keepalive`
 * comments arriving while it blocks. Through a hop that strips Upgrade/Connection: the handshake
 * gets Alcarta's 400 `upgrade_required` and the single-use ticket stays unused.
 */
describe('behind an nginx proxy', () => {
  let server: TestServer;
  let proxy: NginxProxy; // configured for websockets and SSE; ALCARTA_PUBLIC_URL points at it
  let stripping: NginxProxy; // drops Upgrade/Connection
  let agent: Client; // the SDK client, through `proxy`
  let ingester: RestClient;
  let token: string;
  let mailboxId: string;
  let skipReason: string | undefined;

  /** A test that skips only when nginx is not installed (and the run does not require it). */
  const proxied = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };

  const awaitArgs = (extra: Record<string, unknown> = {}) => ({
    event: { type: 'message_received', mailbox_id: mailboxId },
    ...extra,
  });

  before(async () => {
    const proxyPort = await freePort();
    server = await startTestServer({
      env: {
        ALCARTA_PUBLIC_URL: `http://127.0.0.1:${proxyPort}`,
        ALCARTA_KEEPALIVE_SECONDS: String(KEEPALIVE_SECONDS),
      },
    });
    skipReason = requireSystemPackage('nginx-light');
    if (skipReason) return;
    proxy = await startNginx({ upstream: server.url, mode: 'websocket', port: proxyPort });
    stripping = await startNginx({ upstream: server.url, mode: 'strip-upgrade' });
    mailboxId = await createMailbox(server.admin);
    token = (await createToken(server.admin, { scopes: ['mail:read', 'mail:ingest'], mailboxes: [mailboxId] })).secret;
    ingester = server.admin.withToken(token);
    agent = await connectMcp(proxy.url, token);
  });

  after(async () => {
    await agent?.close();
    await proxy?.stop();
    await stripping?.stop();
    await server?.close();
  });

  proxied('websocket delivery through the proxy: ready, pings, the result, close 1000', async () => {
    const wait = await callOk<WaitDescriptor>(agent, 'email_await', awaitArgs({ delivery: 'websocket' }));
    assert.equal(wait.delivery, 'websocket');
    const socketUrl = new URL(wait.websocket_url);
    assert.equal(socketUrl.origin, `ws://127.0.0.1:${proxy.port}`, 'the URL is built from ALCARTA_PUBLIC_URL');
    assert.equal(socketUrl.pathname, '/v1/waits/ws');

    const socket = await openSocket(wait.websocket_url);
    await waitFor('the ready frame', () => socket.frames.length >= 1);
    assert.deepEqual(socket.frames[0], { type: 'ready', wait_id: wait.wait_id });
    // Pings cross the hop too (they are what keeps an idle socket open behind a proxy).
    await waitFor('a ping through nginx', () => socket.pings() >= 1, { timeoutMs: 15_000 });

    const messageId = await ingest(ingester, mailboxId, { subject: 'through nginx' });
    const closed = await socket.closed;
    assert.equal(closed.code, 1000);
    assert.equal(socket.frames.length, 2, 'ready, then exactly one result');
    const { type, ...result } = socket.frames[1] as MessageResult & { type: string };
    assert.equal(type, 'result');
    assert.equal(result.matched, true);
    assert.equal(result.timed_out, false);
    assert.equal(result.shutdown, false);
    assert.deepEqual(
      result.events.map((e) => e.message_id),
      [messageId],
    );
    assert.equal(typeof result.next_cursor, 'string');

    // The socket really went through nginx: it logged the upgrade (101) when the socket closed.
    await waitFor('nginx to log the upgraded request', async () =>
      /^GET \/v1\/waits\/ws 101$/m.test(await proxy.accessLog()),
    );
  });

  proxied('an SSE long poll through the proxy blocks, then an ingest wakes it', async () => {
    const started = Date.now();
    let settled = false;
    const call = callOk<MessageResult>(agent, 'email_await', awaitArgs({ timeout_seconds: 30 })).finally(
      () => (settled = true),
    );
    await waitFor('the poll to park', async () => (await activeWaits(server.url, 'message')) === 1);
    // Not synchronisation: the hop must hold a blocked call open for a while.
    await delay(2000);
    assert.equal(settled, false, 'the call returned before any mail arrived');

    const messageId = await ingest(ingester, mailboxId, { subject: 'wakes the poll' });
    const result = await call;
    assert.equal(result.matched, true);
    assert.equal(result.timed_out, false);
    assert.deepEqual(
      result.events.map((e) => e.message_id),
      [messageId],
    );
    assert.ok(Date.now() - started >= 2000);
  });

  proxied('`: keepalive` comments cross the proxy while a call blocks (buffering is off)', async () => {
    // Timed from the request: a buffering hop holds back the response headers too.
    const sent = Date.now();
    const res = await fetch(new URL('/mcp', proxy.url), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'email_await', arguments: awaitArgs({ timeout_seconds: 6 }) },
      }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const arrivals: number[] = [];
    let stream = '';
    const decoder = new TextDecoder();
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      arrivals.push(Date.now() - sent);
      stream += decoder.decode(value, { stream: true });
    }
    const ended = Date.now() - sent;

    const comments = stream.split('\n').filter((line) => line === ': keepalive');
    assert.ok(comments.length >= 3, `expected keep-alive comments during a 6 s wait, got ${comments.length}`);
    // A hop that holds the stream back shows one silence as long as the wait (seen with nginx
    // buffering on, X-Accel-Buffering ignored and an HTTP/1.0 upstream: headers and all at the end).
    const times = [0, ...arrivals, ended];
    const gap = Math.max(...times.slice(1).map((t, i) => t - times[i]));
    assert.ok(gap < 4000, `the stream was silent for ${gap} ms behind the proxy (keep-alive every 1 s)`);

    const messages = stream
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)) as { id: number; result: { structuredContent: MessageResult } });
    assert.equal(messages.length, 1);
    assert.equal(messages[0].id, 3);
    assert.equal(messages[0].result.structuredContent.timed_out, true);
  });

  proxied('a hop that strips Upgrade/Connection gets 400 upgrade_required; the ticket stays unused', async () => {
    const wait = await callOk<WaitDescriptor>(agent, 'email_await', awaitArgs({ delivery: 'websocket' }));

    const refused = await refusedHandshake(via(wait.websocket_url, stripping.url));
    assert.equal(refused.status, 400);
    assert.match(refused.contentType, /^application\/json/);
    assert.equal(refused.body.error, 'invalid_request');
    assert.equal(refused.body.reason, 'upgrade_required');
    assert.equal(typeof refused.body.message, 'string');
    // Alcarta answered (as a plain GET), not nginx.
    assert.match(await stripping.accessLog(), /^GET \/v1\/waits\/ws 400$/m);
    const [row] = await server.db.query<{ ticket_consumed_at: Date | null }>(
      'SELECT ticket_consumed_at FROM waits WHERE id = $1',
      [wait.wait_id],
    );
    assert.equal(row.ticket_consumed_at, null);

    // The same URL, straight to Alcarta: the ticket still works, once.
    const socket = await openSocket(via(wait.websocket_url, server.url));
    await waitFor('the ready frame', () => socket.frames.length >= 1);
    assert.deepEqual(socket.frames[0], { type: 'ready', wait_id: wait.wait_id });
    const messageId = await ingest(ingester, mailboxId, { subject: 'after the bypass' });
    assert.equal((await socket.closed).code, 1000);
    assert.equal(socket.frames[1].type, 'result');
    assert.equal(socket.frames[1].matched, true);
    assert.deepEqual(
      (socket.frames[1] as MessageResult).events.map((e) => e.message_id),
      [messageId],
    );
  });
});
