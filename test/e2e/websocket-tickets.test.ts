import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, openRefused, openSocket, RefusedSocket, socketUrlOn } from '../support/wait-socket';
import { DrainState } from '#app/lifecycle/drain-state.js';

/**
 * "Websocket delivery" (docs/agents.md, "Waits"): the websocket URL carries a single-use ticket.
 * Exactly one of many racing connections opens; a second use (410 `ticket_consumed`), a use after
 * `connect_deadline` (410 `ticket_expired`) and an unknown ticket (401 `ticket_invalid`) are
 * refused before the upgrade with a JSON body; a plain GET is 400 `upgrade_required` and consumes
 * nothing; tickets are stored only as hashes.
 */
describe('single-use websocket tickets', () => {
  let server: TestServer;
  /** Public URL https://alcarta.example.com/alcarta (TLS and a path prefix at a proxy), connect TTL 1 s. */
  let behindTls: TestServer;
  let agent: Client;
  let agentBehindTls: Client;
  let mailboxId: string;

  before(async () => {
    server = await startTestServer({ ownPublicUrl: true });
    behindTls = await startTestServer({
      env: { ALCARTA_PUBLIC_URL: 'https://alcarta.example.com/alcarta/', ALCARTA_WS_CONNECT_TTL_SECONDS: '1' },
    });
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    agent = await connectMcp(server.url, token.secret);
    agentBehindTls = await connectMcp(behindTls.url, behindTls.adminToken);
  });

  after(async () => {
    await agent?.close();
    await agentBehindTls?.close();
    await server?.close();
    await behindTls?.close();
  });

  const newWait = (client: Client = agent, mailbox = mailboxId) =>
    callOk(client, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailbox },
      timeout_seconds: 120,
      delivery: 'websocket',
    });

  const assertRefusal = (refusal: RefusedSocket, status: number, reason: string) => {
    assert.equal(refusal.status, status, JSON.stringify(refusal.body));
    assert.match(refusal.contentType ?? '', /^application\/json/);
    assert.equal(refusal.body.error, 'invalid_request');
    assert.equal(refusal.body.reason, reason);
    assert.equal(typeof refusal.body.message, 'string');
  };

  it('of 12 simultaneous connections exactly one opens; the others get 410 ticket_consumed', async () => {
    const d = await newWait();
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => openSocket(d.websocket_url)));
    const opened = outcomes.filter((o) => o.opened);
    assert.equal(opened.length, 1, 'exactly one connection wins the ticket');
    for (const refusal of outcomes.filter((o) => !o.opened)) assertRefusal(refusal, 410, 'ticket_consumed');

    const [winner] = opened;
    assert.deepEqual(await winner.frame(1), { type: 'ready', wait_id: d.wait_id });
    winner.ws.close();
    await winner.closed;
    assertRefusal(await openRefused(d.websocket_url), 410, 'ticket_consumed');

    // The wait itself goes on: its wait_id still answers.
    const messageId = await ingest(server.admin, mailboxId, { subject: 'after the socket closed' });
    const result = await callOk(agent, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.events.map((e: { message_id: string }) => e.message_id),
      [messageId],
    );
  });

  it('an unknown, malformed or missing ticket gets 401 ticket_invalid', async () => {
    const d = await newWait();
    const url = new URL(d.websocket_url);
    const real = url.searchParams.get('ticket')!;
    const tickets = [
      `wst_${'A'.repeat(43)}`, // well-formed, never issued
      real.slice(0, -1) + (real.endsWith('x') ? 'y' : 'x'), // one character off
      'garbage',
      '',
    ];
    for (const ticket of tickets) {
      url.searchParams.set('ticket', ticket);
      assertRefusal(await openRefused(url.toString()), 401, 'ticket_invalid');
    }
    url.searchParams.delete('ticket');
    assertRefusal(await openRefused(url.toString()), 401, 'ticket_invalid');
    // None of that touched the real ticket.
    const socket = await openOk(d.websocket_url);
    assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: d.wait_id });
    socket.ws.close();
    await socket.closed;
  });

  it('a plain GET of the websocket URL is 400 upgrade_required and leaves the ticket usable', async () => {
    const d = await newWait();
    const plain = d.websocket_url.replace(/^ws/, 'http');
    // No upgrade headers at all; or a hop that dropped only one of the two.
    const handshake = { 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    for (const headers of [
      {},
      { upgrade: 'websocket', ...handshake },
      { connection: 'Upgrade', ...handshake },
    ] as Array<Record<string, string>>) {
      const res = await plainGet(plain, headers);
      assert.equal(res.status, 400, JSON.stringify(headers));
      assert.match(res.contentType ?? '', /^application\/json/);
      assert.equal(res.body.error, 'invalid_request');
      assert.equal(res.body.reason, 'upgrade_required');
    }
    const [row] = await server.db.query<{ consumed: Date | null }>(
      'SELECT ticket_consumed_at AS consumed FROM waits WHERE id = $1',
      [d.wait_id],
    );
    assert.equal(row.consumed, null);
    const socket = await openOk(d.websocket_url);
    assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: d.wait_id });
    const messageId = await ingest(server.admin, mailboxId, { subject: 'after the plain GET' });
    assert.equal((await socket.closed).code, 1000);
    assert.equal(socket.frames[1].type, 'result');
    assert.deepEqual(
      socket.frames[1].events.map((e: { message_id: string }) => e.message_id),
      [messageId],
    );
  });

  it('tickets are stored only as hashes: no table holds a wst_ value', async () => {
    const issued = [await newWait(), await newWait()];
    const tables = await server.db.query<{ name: string }>(
      `SELECT quote_ident(table_name) AS name FROM information_schema.tables
        WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
    );
    assert.ok(tables.some((t) => t.name === 'waits'));
    // Neither the prefix nor the random part of an issued ticket is stored anywhere.
    const patterns = [
      '%wst\\_%',
      ...issued.map((d) => `%${new URL(d.websocket_url).searchParams.get('ticket')!.slice(4)}%`),
    ];
    for (const { name } of tables) {
      const [{ count }] = await server.db.query<{ count: string }>(
        `SELECT count(*) FROM ${name} AS t WHERE t::text LIKE ANY($1)`,
        [patterns],
      );
      assert.equal(count, '0', `table ${name} holds a ticket`);
    }
    const rows = await server.db.query<{ hash: string | null }>(
      'SELECT ticket_hash AS hash FROM waits WHERE id = ANY($1)',
      [issued.map((d) => d.wait_id)],
    );
    assert.equal(rows.length, 2);
    for (const { hash } of rows) assert.ok(hash, 'a ticket hash is stored');
  });

  it('with an https:// ALCARTA_PUBLIC_URL the websocket_url is wss:// on that host and path prefix', async () => {
    const box = await createMailbox(behindTls.admin);
    const t0 = Date.now();
    const d = await newWait(agentBehindTls, box);
    const t1 = Date.now();
    const url = new URL(d.websocket_url);
    assert.equal(url.protocol, 'wss:');
    assert.equal(url.host, 'alcarta.example.com');
    assert.equal(url.pathname, '/alcarta/v1/waits/ws', 'the proxy path prefix is kept');
    assert.match(url.searchParams.get('ticket') ?? '', /^wst_[0-9A-Za-z]{43}$/);
    const deadline = Date.parse(d.connect_deadline);
    // now + 1 s (ALCARTA_WS_CONNECT_TTL_SECONDS), with a second of slack either way.
    assert.ok(deadline >= t0 && deadline <= t1 + 2000, `connect_deadline ${d.connect_deadline}`);
  });

  it('a URL not opened before connect_deadline gets 410 ticket_expired; its wait_id still answers', async () => {
    const box = await createMailbox(behindTls.admin);
    const d = await newWait(agentBehindTls, box);
    // The database's clock decides (the ticket is consumed by a conditional UPDATE there).
    await waitFor(
      'the connect deadline to pass',
      async () =>
        (
          await behindTls.db.query<{ passed: boolean }>(
            'SELECT connect_deadline < now() AS passed FROM waits WHERE id = $1',
            [d.wait_id],
          )
        )[0].passed,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // What the TLS proxy forwards: its path prefix stripped, to the server itself.
    const local = socketUrlOn(behindTls.url, d.websocket_url).replace('/alcarta/', '/');
    assertRefusal(await openRefused(local), 410, 'ticket_expired');
    assertRefusal(await openRefused(local), 410, 'ticket_expired');

    const pending = await callOk(agentBehindTls, 'email_await', { wait_id: d.wait_id, timeout_seconds: 0 });
    assert.equal(pending.timed_out, true);
    assert.equal(pending.wait_status, 'pending');
    const messageId = await ingest(behindTls.admin, box, { subject: 'after the deadline' });
    const result = await callOk(agentBehindTls, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.events.map((e: { message_id: string }) => e.message_id),
      [messageId],
    );
  });
});

/** A GET through node:http (fetch may not set Connection/Upgrade), with the JSON body it got. */
function plainGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; contentType: string | undefined; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpGet(url, { headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body: JSON.parse(text) }),
      );
    });
    req.on('error', reject);
  });
}

describe('websocket tickets on a draining replica', () => {
  it('a replica that is shutting down refuses the upgrade with 503 and leaves the ticket unused', async () => {
    const server = await startTestServer({ ownPublicUrl: true });
    const agent = await connectMcp(server.url, server.adminToken);
    try {
      const mailboxId = await createMailbox(server.admin);
      const d = await callOk(agent, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailboxId },
        timeout_seconds: 120,
        delivery: 'websocket',
      });
      void server.running.app.get(DrainState).begin();
      const refusal = await openRefused(d.websocket_url);
      assert.equal(refusal.status, 503);
      assert.equal(refusal.body.reason, 'shutting_down');
      const [row] = await server.db.query<{ consumed: Date | null }>(
        'SELECT ticket_consumed_at AS consumed FROM waits WHERE id = $1',
        [d.wait_id],
      );
      assert.equal(row.consumed, null, 'the ticket stays usable on another replica');
    } finally {
      await agent.close();
      await server.close();
    }
  });
});
