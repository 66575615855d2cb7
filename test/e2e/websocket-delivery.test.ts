import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, OpenedSocket } from '../support/wait-socket';

const TIMED_OUT = { matched: false, timed_out: true, shutdown: false, events: [] };

/**
 * "Websocket delivery" (docs/agents.md, "Waits"), seen by a real `ws` client: `delivery:
 * "websocket"` / `"any"` returns a descriptor at once; the socket sends `ready`, then exactly one
 * result (the poll result's shape) and closes with 1000; the server pings; argument errors are
 * those of poll waits.
 */
describe('websocket delivery of waits', () => {
  let server: TestServer;
  let publicUrl: string;
  let agent: Client;
  let mailboxId: string;

  before(async () => {
    server = await startTestServer({ ownPublicUrl: true, env: { ALCARTA_KEEPALIVE_SECONDS: '1' } });
    publicUrl = server.url;
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  /** Calls a tool that must answer with a websocket descriptor, checking the descriptor fully. */
  const descriptorOf = async (tool: string, args: Record<string, unknown>) => {
    const timeoutSeconds = args.timeout_seconds as number;
    const t0 = Date.now();
    const d = await callOk(agent, tool, args);
    const t1 = Date.now();
    assert.deepEqual(Object.keys(d).sort(), ['connect_deadline', 'delivery', 'expires_at', 'wait_id', 'websocket_url']);
    assert.equal(d.delivery, 'websocket');
    assert.match(d.wait_id, /^wt_[0-9A-Za-z]+$/);
    const url = new URL(d.websocket_url); // absolute: parses without a base
    assert.equal(url.origin, publicUrl.replace(/^http/, 'ws'), 'built from ALCARTA_PUBLIC_URL, http → ws');
    assert.match(url.searchParams.get('ticket') ?? '', /^wst_[0-9A-Za-z]{43}$/);
    assertAbout(d.connect_deadline, t0 + 30_000, t1 + 30_000, 'connect_deadline = now + connect TTL (30 s)');
    assertAbout(d.expires_at, t0 + timeoutSeconds * 1000, t1 + timeoutSeconds * 1000, 'expires_at');
    return d as { delivery: 'websocket'; wait_id: string; websocket_url: string };
  };

  /** Waits until `n` sockets of `kind` are parked in the server. */
  const socketsParked = (kind: 'message' | 'request', n: number) =>
    waitFor(`${n} open ${kind} socket(s)`, async () => (await activeWaits(server.url, kind, 'websocket')) === n, {
      timeoutMs: 30_000,
    });

  /** Reads `ready`, then the one result; checks close 1000 and that nothing else came. */
  const delivered = async (socket: OpenedSocket, waitId: string) => {
    assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: waitId });
    const { code } = await socket.closed;
    assert.equal(code, 1000);
    assert.equal(socket.frames.length, 2, `exactly one result frame: ${JSON.stringify(socket.frames)}`);
    const { type, ...result } = socket.frames[1];
    assert.equal(type, 'result');
    return result;
  };

  it('a message wait returns a descriptor at once; the socket sends ready, the match, then closes 1000', async () => {
    const earlier = await ingest(server.admin, mailboxId, { subject: 'before the wait' });
    const d = await descriptorOf('email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: 120,
      delivery: 'websocket',
    });
    const socket = await openOk(d.websocket_url);
    await socketsParked('message', 1);
    assert.equal(socket.frames.length, 1, 'only ready while nothing matched');

    const from = 'writer@example.org';
    const messageId = await ingest(server.admin, mailboxId, { from, subject: 'after the wait started' });
    const result = await delivered(socket, d.wait_id);
    const { next_cursor: cursor, events, ...rest } = result;
    assert.deepEqual(rest, { matched: true, timed_out: false, shutdown: false });
    assert.equal(events.length, 1, `only the message after the start (not ${earlier})`);
    const [event] = events;
    assert.equal(typeof event.received_at, 'string');
    assert.deepEqual(
      { ...event, received_at: undefined },
      {
        type: 'message_received',
        mailbox_id: mailboxId,
        message_id: messageId,
        from,
        subject: 'after the wait started',
        received_at: undefined,
        // JSON ingest: nothing to check (docs/mail.md).
        authentication: { spf: 'none', dkim: 'none', dmarc: 'none', arc: 'none' },
        from_verified: false,
      },
    );
    const resumed = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, since_cursor: cursor });
    assert.deepEqual(resumed.messages, [], 'next_cursor is after the delivered message');
  });

  it('with since_cursor ("any" on a websocket deployment) the socket delivers what a poll would', async () => {
    const box = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [box] });
    const reader = await connectMcp(server.url, token.secret);
    try {
      const { next_cursor: start } = await callOk(reader, 'list_messages', { mailbox_id: box });
      const ids = [
        await ingest(server.admin, box, { subject: 'first' }),
        await ingest(server.admin, box, { subject: 'second' }),
      ];
      const d = await callOk(reader, 'monitor_inbox', {
        mailbox_id: box,
        since_cursor: start,
        timeout_seconds: 60,
        delivery: 'any',
      });
      assert.equal(d.delivery, 'websocket');
      assert.equal(new URL(d.websocket_url).origin, publicUrl.replace(/^http/, 'ws'));
      const result = await delivered(await openOk(d.websocket_url), d.wait_id);
      assert.deepEqual(
        result.events.map((e: { message_id: string }) => e.message_id),
        ids,
      );
      const polled = await callOk(reader, 'monitor_inbox', {
        mailbox_id: box,
        since_cursor: start,
        timeout_seconds: 0,
      });
      assert.deepEqual(result, polled);
    } finally {
      await reader.close();
    }
  });

  it('a request wait on an already approved request delivers the match at once (level-triggered)', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Already decided',
    });
    const approved = await server.admin.post(`/v1/requests/${requestId}/approve`, { reason: 'fine' });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));

    const d = await descriptorOf('monitor_approval', {
      request_id: requestId,
      timeout_seconds: 3600,
      delivery: 'websocket',
    });
    const result = await delivered(await openOk(d.websocket_url), d.wait_id);
    assert.equal(result.matched, true);
    assert.deepEqual(result.requests, [{ request_id: requestId, state: 'approved' }]);
    const polled = await callOk(agent, 'monitor_approval', { request_id: requestId, timeout_seconds: 0 });
    assert.deepEqual(result, polled, 'the same result a poll wait gives');
  });

  it('a request wait ("any") delivers the decision made while the socket is open', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Decide later',
    });
    const d = await callOk(agent, 'email_await', {
      event: { type: 'request_state_changed', request_ids: [requestId] },
      timeout_seconds: 600,
      delivery: 'any',
    });
    assert.equal(d.delivery, 'websocket');
    const socket = await openOk(d.websocket_url);
    await socketsParked('request', 1);

    const rejected = await server.admin.post(`/v1/requests/${requestId}/reject`, { reason: 'no' });
    assert.equal(rejected.status, 200, JSON.stringify(rejected.body));
    const result = await delivered(socket, d.wait_id);
    assert.deepEqual(
      { ...result, events: undefined },
      {
        matched: true,
        timed_out: false,
        shutdown: false,
        events: undefined,
        requests: [{ request_id: requestId, state: 'rejected' }],
      },
    );
    assert.equal(result.events.length, 1);
    assert.equal(result.events[0].type, 'request_state_changed');
    assert.equal(result.events[0].request_id, requestId);
    assert.equal(result.events[0].state, 'rejected');
    assert.equal(result.events[0].previous_state, 'pending');
  });

  it('the server pings an open socket (ALCARTA_KEEPALIVE_SECONDS=1: at least 2 pings)', async () => {
    const d = await descriptorOf('email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId, subject_contains: 'ping test' },
      timeout_seconds: 120,
      delivery: 'websocket',
    });
    const socket = await openOk(d.websocket_url);
    await waitFor('two pings', () => socket.pings() >= 2, { timeoutMs: 30_000 });
    assert.equal(socket.frames.length, 1, 'pings are not frames: still only ready');

    await ingest(server.admin, mailboxId, { subject: 'PING TEST done' });
    const result = await delivered(socket, d.wait_id);
    assert.equal(result.matched, true);
  });

  it('a wait that times out delivers timed_out with a next_cursor, then closes 1000', async () => {
    const { next_cursor: start } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 });
    await ingest(server.admin, mailboxId, { subject: 'not from nobody' });
    const d = await descriptorOf('email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId, from: 'nobody@example.net' },
      since_cursor: start,
      timeout_seconds: 2,
      delivery: 'websocket',
    });
    const { next_cursor: cursor, ...rest } = await delivered(await openOk(d.websocket_url), d.wait_id);
    assert.deepEqual(rest, TIMED_OUT);
    assert.equal(typeof cursor, 'string');
    const { messages } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, since_cursor: cursor });
    assert.deepEqual(messages, [], 'next_cursor is past the message that did not match');
  });

  it('a wait on every mailbox (token bound to "*") delivers mail of a mailbox created after it started', async () => {
    const everywhere = await connectMcp(server.url, server.adminToken);
    try {
      const d = await callOk(everywhere, 'monitor_inbox', {
        from: 'Late@Example.net',
        timeout_seconds: 120,
        delivery: 'websocket',
      });
      const socket = await openOk(d.websocket_url);
      await socketsParked('message', 1);
      const box = await createMailbox(server.admin);
      await ingest(server.admin, box, { from: 'someone@example.net', subject: 'filtered out' });
      const messageId = await ingest(server.admin, box, { from: 'late@example.net', subject: 'new mailbox' });
      const result = await delivered(socket, d.wait_id);
      assert.deepEqual(
        result.events.map((e: { mailbox_id: string; message_id: string }) => [e.mailbox_id, e.message_id]),
        [[box, messageId]],
      );
    } finally {
      await everywhere.close();
    }
  });

  it('argument errors are the same as for poll waits, and create no wait', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'For argument errors',
    });
    const message = { type: 'message_received', mailbox_id: mailboxId };
    const request = { type: 'request_state_changed', request_ids: [requestId] };
    const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
      [
        'message timeout over the limit',
        { event: message, timeout_seconds: 301 },
        { error: 'invalid_request', reason: 'timeout_exceeds_limit', max_timeout_seconds: 300 },
      ],
      [
        'request timeout over the limit',
        { event: request, timeout_seconds: 14_401 },
        { error: 'invalid_request', reason: 'timeout_exceeds_limit', max_timeout_seconds: 14_400 },
      ],
      [
        'malformed cursor',
        { event: message, since_cursor: 'garbage' },
        { error: 'invalid_request', reason: 'invalid_cursor' },
      ],
      ['since_cursor on a request wait', { event: request, since_cursor: 'x' }, { error: 'invalid_request' }],
      [
        'unknown request',
        { event: { ...request, request_ids: ['chk_0000000000000000000000'] } },
        { error: 'not_found' },
      ],
      [
        'invisible mailbox',
        { event: { ...message, mailbox_id: 'mbx_0000000000000000000000' } },
        { error: 'not_found' },
      ],
    ];
    const [{ count: before }] = await server.db.query<{ count: string }>('SELECT count(*) FROM waits');
    for (const [what, args, expected] of cases) {
      const asPoll = await callError(agent, 'email_await', { ...args, delivery: 'poll' });
      for (const key of Object.keys(expected)) assert.equal(asPoll[key], expected[key], `${what} (poll): ${key}`);
      for (const delivery of ['websocket', 'any']) {
        const error = await callError(agent, 'email_await', { ...args, delivery });
        assert.deepEqual(error, asPoll, `${what}: ${delivery} answers as poll`);
      }
    }
    const [{ count: after }] = await server.db.query<{ count: string }>('SELECT count(*) FROM waits');
    assert.equal(after, before, 'no persisted wait was stored');
  });
});

/** `iso` is a timestamp within [low, high] (ms), with a second of slack for rounding. */
function assertAbout(iso: string, low: number, high: number, what: string): void {
  assert.match(iso, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, `${what} is an ISO timestamp`);
  const at = Date.parse(iso);
  assert.ok(
    at >= low - 1000 && at <= high + 1000,
    `${what}: ${iso} not within [${new Date(low).toISOString()}, ${new Date(high).toISOString()}]`,
  );
}
