import assert from 'node:assert/strict';

import { connect, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { callOk, connectMcp, streamMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk } from '../support/wait-socket';

/** Opens a raw TCP connection to `url` and resolves once connected. */
function rawConnect(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Milliseconds from now until the server closes `socket` (data it sends is read and dropped). */
function closedAfter(socket: Socket): Promise<number> {
  const start = Date.now();
  return new Promise((resolve) => {
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
    socket.once('close', () => resolve(Date.now() - start));
  });
}

/**
 * "Slow and stuck clients" (docs/operators.md, "Limits and hardening"): headers within 10 s, the
 * whole request within 30 s, and a response nobody reads is abandoned after 60 s. The defaults are
 * checked on a server started without overrides (headers: the real 10 s); the body and
 * unread-response limits with short settings, so the file stays fast. Parked waits, which keep
 * their response open and write a keep-alive now and then, and open websockets are not cut by any
 * of them.
 */
describe('slow and stuck clients', { concurrency: true }, () => {
  let defaults: TestServer;
  let short: TestServer;
  const SHORT = { headers: 2, body: 3, unread: 2 };

  before(async () => {
    defaults = await startTestServer();
    short = await startTestServer({
      env: {
        ALCARTA_HEADERS_TIMEOUT_SECONDS: String(SHORT.headers),
        ALCARTA_BODY_TIMEOUT_SECONDS: String(SHORT.body),
        ALCARTA_UNREAD_RESPONSE_TIMEOUT_SECONDS: String(SHORT.unread),
        ALCARTA_KEEPALIVE_SECONDS: '1',
      },
      ownPublicUrl: true,
    });
  });

  after(async () => {
    await defaults?.close();
    await short?.close();
  });

  it('by default, closes a connection whose headers stop halfway after 10 s', async () => {
    const http = defaults.running.app.getHttpServer();
    assert.equal(http.headersTimeout, 10_000);
    assert.equal(http.requestTimeout, 30_000);
    const socket = await rawConnect(defaults.url);
    const closed = closedAfter(socket);
    socket.write('GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-Half: ');
    const ms = await closed;
    assert.ok(ms >= 9_000 && ms <= 12_500, `closed after ${ms} ms`);
  });

  it('closes a connection whose body stops halfway after the body limit', async () => {
    const socket = await rawConnect(short.url);
    const closed = closedAfter(socket);
    socket.write(
      'POST /v1/mailboxes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
        `Authorization: Bearer ${short.adminToken}\r\nContent-Length: 100\r\n\r\n{"address":`,
    );
    const ms = await closed;
    assert.ok(ms >= SHORT.body * 1000 - 1000 && ms <= SHORT.body * 1000 + 2500, `closed after ${ms} ms`);
  });

  it('does not cut a parked wait that outlasts every limit', async () => {
    const mailboxId = await createMailbox(short.admin);
    const token = await createToken(short.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const waitSeconds = SHORT.body + 3;
    const started = Date.now();
    const stream = await streamMcp(short.url, token.secret, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: waitSeconds },
      },
    });
    const { messages, broken } = await stream.done;
    assert.equal(broken, false);
    assert.ok(Date.now() - started >= waitSeconds * 1000 - 500, 'the wait ran its full time');
    const answer = messages.find((m: { id?: unknown }) => m.id === 1);
    assert.ok(answer?.result, `the wait answered: ${stream.text.slice(-500)}`);
  });

  it('does not cut a websocket that stays open longer than every limit', async () => {
    const mailboxId = await createMailbox(short.admin);
    const token = await createToken(short.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const waitSeconds = SHORT.body + 3;
    const agent = await connectMcp(short.url, token.secret);
    try {
      const d = await callOk(agent, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailboxId },
        timeout_seconds: waitSeconds,
        delivery: 'websocket',
      });
      const opened = Date.now();
      const socket = await openOk(d.websocket_url as string);
      const { code } = await socket.closed;
      assert.ok(Date.now() - opened >= waitSeconds * 1000 - 1500, 'open until the wait timed out');
      assert.equal(code, 1000, 'closed normally, after its result');
      assert.equal(socket.frames.at(-1)?.timed_out, true, JSON.stringify(socket.frames.at(-1)));
    } finally {
      await agent.close();
    }
  });

  it('abandons a large response the client does not read, and releases its connection', async () => {
    const mailboxId = await createMailbox(short.admin);
    const token = await createToken(short.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const messageId = await ingest(short.admin, mailboxId, { text: 'unread '.repeat(3_000_000) });
    // The server's end of the test's connection (other tests use this server at the same time).
    const serverSockets = new Map<number, Socket>();
    const http = short.running.app.getHttpServer();
    const track = (s: Socket) => serverSockets.set(s.remotePort ?? 0, s);
    http.on('connection', track);

    const socket = await rawConnect(short.url);
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'get_message', arguments: { message_id: messageId } },
    });
    socket.pause(); // never reads
    let ended = false;
    socket.once('close', () => (ended = true));
    socket.on('error', () => undefined);
    socket.write(
      'POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
        `Accept: application/json, text/event-stream\r\nAuthorization: Bearer ${token.secret}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const serverSide = await waitFor('the server to accept the connection', () => serverSockets.get(socket.localPort!));
    http.off('connection', track);
    const sent = Date.now();
    await waitFor('the unread response to be abandoned', () => serverSide.destroyed, {
      timeoutMs: SHORT.unread * 1000 + 15_000,
      intervalMs: 100,
    });
    assert.ok(Date.now() - sent >= SHORT.unread * 1000 - 500, 'not before the limit');
    // A destroyed socket lets go of its buffer when it has closed (its pending write is cancelled then).
    await waitFor('the abandoned socket to close', () => serverSide.closed);
    assert.equal(serverSide.writableLength, 0, 'its buffered output is released');
    socket.resume();
    await waitFor('the client to see the connection end', () => ended);
  });
});
