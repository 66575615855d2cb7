import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, OpenedSocket } from '../support/wait-socket';

const ids = (result: { events: Array<{ message_id: string }> }) => result.events.map((e) => e.message_id);

/**
 * docs/agents.md "Waits" `wait_id` fallback: `email_await {"wait_id"}` long-polls a persisted wait
 * and returns the same result the socket delivers, whether or not the socket was ever opened; a
 * poll that times out leaves the wait pending; once resolved the result is fixed. Waits are bound
 * to their token. With `ALCARTA_WEBSOCKETS=off`, `"websocket"` is refused and `"any"` gives a
 * wait_id to poll.
 */
describe('persisted waits and the wait_id fallback', () => {
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;

  before(async () => {
    // Housekeeping every second, for the event retention tests below.
    server = await startTestServer({ ownPublicUrl: true, env: { ALCARTA_HOUSEKEEPING_SECONDS: '1' } });
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  const messageWait = (extra: Record<string, unknown> = {}) =>
    callOk(agent, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: 120,
      delivery: 'websocket',
      ...extra,
    });

  const poll = (waitId: string, timeoutSeconds = 60, client = agent) =>
    callOk(client, 'email_await', { wait_id: waitId, timeout_seconds: timeoutSeconds });

  const pollsParked = (n: number) =>
    waitFor(`${n} parked wait_id poll(s)`, async () => (await activeWaits(server.url, undefined, 'poll')) === n, {
      timeoutMs: 30_000,
    });

  /** The socket's result frame (after `ready`), without its `type`; checks close 1000. */
  const socketResult = async (socket: OpenedSocket) => {
    assert.equal((await socket.closed).code, 1000);
    assert.equal(socket.frames.length, 2);
    assert.equal(socket.frames[0].type, 'ready');
    const { type, ...result } = socket.frames[1];
    assert.equal(type, 'result');
    return result;
  };

  it('wait_id long-polls a wait whose socket was never opened; the socket opened later delivers the same', async () => {
    const d = await messageWait();
    const polled = poll(d.wait_id);
    await pollsParked(1);
    const messageId = await ingest(server.admin, mailboxId, { subject: 'for the poller' });
    const result = await polled;
    const { next_cursor: cursor, events, ...rest } = result;
    assert.deepEqual(rest, { matched: true, timed_out: false, shutdown: false });
    assert.equal(typeof cursor, 'string');
    assert.deepEqual(ids({ events }), [messageId]);

    const socket = await openOk(d.websocket_url);
    assert.deepEqual(await socketResult(socket), result);
    assert.deepEqual(await poll(d.wait_id, 0), result, 'polled again: the same');
  });

  it('after the socket delivered, wait_id returns the same result (request wait)', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Approve me',
    });
    const d = await callOk(agent, 'monitor_approval', {
      request_id: requestId,
      timeout_seconds: 3600,
      delivery: 'websocket',
    });
    const socket = await openOk(d.websocket_url);
    await waitFor(
      'the socket to be parked',
      async () => (await activeWaits(server.url, 'request', 'websocket')) === 1,
      {
        timeoutMs: 30_000,
      },
    );
    assert.equal((await server.admin.post(`/v1/requests/${requestId}/approve`, {})).status, 200);
    const delivered = await socketResult(socket);
    assert.equal(delivered.matched, true);
    assert.deepEqual(delivered.requests, [{ request_id: requestId, state: 'approved' }]);
    assert.deepEqual(await poll(d.wait_id, 0), delivered);
    assert.deepEqual(await poll(d.wait_id, 30), delivered);
  });

  it('a wait_id poll that times out says wait_status pending and does not end the wait', async () => {
    const { next_cursor: start } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 });
    const d = await messageWait({
      event: { type: 'message_received', mailbox_id: mailboxId, subject_contains: 'later' },
    });
    const socket = await openOk(d.websocket_url);
    await socket.frame(1);

    const timedOut = await poll(d.wait_id, 1);
    assert.deepEqual(timedOut, {
      matched: false,
      timed_out: true,
      shutdown: false,
      events: [],
      next_cursor: timedOut.next_cursor,
      wait_status: 'pending',
    });
    assert.equal(typeof timedOut.next_cursor, 'string');
    const [row] = await server.db.query<{ status: string }>('SELECT status FROM waits WHERE id = $1', [d.wait_id]);
    assert.equal(row.status, 'pending');
    assert.equal(socket.frames.length, 1, 'the socket got no result');

    const messageId = await ingest(server.admin, mailboxId, { subject: 'Later, at last' });
    const delivered = await socketResult(socket);
    assert.equal(delivered.matched, true);
    assert.deepEqual(ids(delivered), [messageId]);
    assert.deepEqual(await poll(d.wait_id), delivered);
    // The pending poll's cursor was where the wait started: resuming from it finds the same message.
    const resumed = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, since_cursor: timedOut.next_cursor });
    assert.deepEqual(
      resumed.messages.map((m: { message_id: string }) => m.message_id),
      [messageId],
    );
    const all = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, since_cursor: start });
    assert.deepEqual(resumed.messages, all.messages);
  });

  it('once resolved, the result is fixed: later messages do not change it', async () => {
    const d = await messageWait();
    const first = await ingest(server.admin, mailboxId, { subject: 'first' });
    const result = await poll(d.wait_id);
    assert.equal(result.matched, true);
    assert.deepEqual(ids(result), [first]);

    await ingest(server.admin, mailboxId, { subject: 'second' });
    await ingest(server.admin, mailboxId, { subject: 'third' });
    assert.deepEqual(await poll(d.wait_id, 0), result);
    assert.deepEqual(await poll(d.wait_id, 5), result);
    assert.deepEqual(await socketResult(await openOk(d.websocket_url)), result);
  });

  it("wait_id with other arguments is invalid_request; its timeout has the kind's limit", async () => {
    const d = await messageWait();
    for (const extra of [
      { event: { type: 'message_received', mailbox_id: mailboxId } },
      { since_cursor: d.wait_id },
      { delivery: 'websocket' },
      { delivery: 'any' },
    ]) {
      const error = await callError(agent, 'email_await', { wait_id: d.wait_id, ...extra });
      assert.equal(error.error, 'invalid_request', JSON.stringify(extra));
    }
    const tooLong = await callError(agent, 'email_await', { wait_id: d.wait_id, timeout_seconds: 301 });
    assert.equal(tooLong.error, 'invalid_request');
    assert.equal(tooLong.reason, 'timeout_exceeds_limit');
    assert.equal(tooLong.max_timeout_seconds, 300);
  });

  it("another token's wait_id, and an unknown one, are not_found", async () => {
    const d = await messageWait();
    // Same scopes and the same mailbox: the wait is bound to the token, not to the mailbox.
    const other = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] });
    const otherClient = await connectMcp(server.url, other.secret);
    try {
      const stranger = await callError(otherClient, 'email_await', { wait_id: d.wait_id, timeout_seconds: 0 });
      const unknown = await callError(agent, 'email_await', {
        wait_id: 'wt_0000000000000000000000',
        timeout_seconds: 0,
      });
      const garbage = await callError(agent, 'email_await', { wait_id: 'nonsense', timeout_seconds: 0 });
      for (const error of [stranger, unknown, garbage]) assert.equal(error.error, 'not_found');
      assert.equal(stranger.reason, unknown.reason, 'invisible and unknown answer alike');
    } finally {
      await otherClient.close();
    }
    // The owner still sees it.
    assert.equal((await poll(d.wait_id, 0)).wait_status, 'pending');
  });

  /**
   * docs/operators.md "Capacity" event retention: housekeeping deletes events older than
   * ALCARTA_EVENT_RETENTION_DAYS (30 by default; the events of this mailbox are back-dated 40
   * days), and nothing a client holds notices: cursors from before resume exactly, a blocking wait
   * with such a cursor and a websocket wait parked across the pruning wake on new mail, request
   * waits still see requests whose events are gone (with the same latest event), and a websocket
   * request wait parked across it still wakes.
   */
  describe('event retention', () => {
    let reader: Client;
    let retained: string;
    const messageIds = (page: { messages: Array<{ message_id: string }> }) => page.messages.map((m) => m.message_id);
    const eventCount = async (where: string, params: unknown[]) =>
      Number((await server.db.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE ${where}`, params))[0].n);

    before(async () => {
      retained = await createMailbox(server.admin);
      const token = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [retained] });
      reader = await connectMcp(server.url, token.secret);
    });

    after(async () => {
      await reader?.close();
    });

    it('old events are pruned in the background; cursors, message waits and request waits are unaffected', async () => {
      const [m1, m2, m3] = [
        await ingest(server.admin, retained, { subject: 'one' }),
        await ingest(server.admin, retained, { subject: 'two' }),
        await ingest(server.admin, retained, { subject: 'three' }),
      ];
      const afterFirst = await callOk(reader, 'list_messages', { mailbox_id: retained, limit: 1 });
      assert.deepEqual(messageIds(afterFirst), [m1]);
      const atEnd = (
        await callOk(reader, 'list_messages', { mailbox_id: retained, since_cursor: afterFirst.next_cursor })
      ).next_cursor as string;
      const approvedId = (await callOk(reader, 'request_approval', { mailbox_id: retained, title: 'Decided long ago' }))
        .request_id as string;
      assert.equal((await server.admin.post(`/v1/requests/${approvedId}/approve`, {})).status, 200);
      const pendingId = (await callOk(reader, 'request_approval', { mailbox_id: retained, title: 'Still open' }))
        .request_id as string;
      const [approvedEvent] = await server.db.query<{ payload: object }>(
        `SELECT payload FROM events WHERE request_id = $1 ORDER BY id DESC LIMIT 1`,
        [approvedId],
      );

      // Parked across the pruning: a websocket message wait (its stored cursor is the end, after m3)
      // and a websocket wait on the pending request.
      const socketsBefore = await activeWaits(server.url, undefined, 'websocket');
      const messageSocketWait = await callOk(reader, 'email_await', {
        event: { type: 'message_received', mailbox_id: retained },
        timeout_seconds: 120,
        delivery: 'websocket',
      });
      const messageSocket = await openOk(messageSocketWait.websocket_url);
      const requestSocketWait = await callOk(reader, 'monitor_approval', {
        request_id: pendingId,
        timeout_seconds: 3600,
        delivery: 'websocket',
      });
      const requestSocket = await openOk(requestSocketWait.websocket_url);
      await waitFor(
        'both sockets parked',
        async () => (await activeWaits(server.url, undefined, 'websocket')) === socketsBefore + 2,
        {
          timeoutMs: 30_000,
        },
      );

      // Every event of the mailbox but m3's is 40 days old; housekeeping deletes them.
      const backDated = await server.db.query(
        `UPDATE events SET created_at = now() - interval '40 days'
          WHERE mailbox_id = $1 AND message_id IS DISTINCT FROM $2 RETURNING id`,
        [retained, m3],
      );
      assert.ok(backDated.length >= 5, `back-dated ${backDated.length} events`);
      await waitFor(
        'the old events to be deleted',
        async () => (await eventCount('mailbox_id = $1 AND message_id IS DISTINCT FROM $2', [retained, m3])) === 0,
        {
          timeoutMs: 30_000,
        },
      );
      assert.equal(await eventCount('message_id = $1', [m3]), 1, 'the recent event stays');
      assert.ok((await eventCount('mailbox_id = $1', [mailboxId])) > 0, "other mailboxes' recent events stay");

      // Cursors from before resume exactly: nothing skipped, nothing repeated.
      const resumed = await callOk(reader, 'list_messages', {
        mailbox_id: retained,
        since_cursor: afterFirst.next_cursor,
      });
      assert.deepEqual(messageIds(resumed), [m2, m3]);
      assert.equal(resumed.next_cursor, atEnd);
      const awaited = await callOk(reader, 'email_await', {
        event: { type: 'message_received', mailbox_id: retained },
        since_cursor: afterFirst.next_cursor,
        timeout_seconds: 5,
      });
      assert.deepEqual(ids(awaited), [m2, m3]);
      assert.deepEqual(messageIds(await callOk(reader, 'list_messages', { mailbox_id: retained })), [m1, m2, m3]);

      // Request waits: the decided request still answers at once with the same latest event; the
      // pending one is still watched (its only event is gone too).
      const decided = await callOk(reader, 'monitor_approval', { request_id: approvedId, timeout_seconds: 5 });
      assert.equal(decided.matched, true);
      assert.deepEqual(decided.events, [approvedEvent.payload]);
      assert.deepEqual(decided.requests, [{ request_id: approvedId, state: 'approved' }]);
      const pendingPoll = await poll(requestSocketWait.wait_id, 0, reader);
      assert.equal(pendingPoll.wait_status, 'pending');
      assert.deepEqual(pendingPoll.requests, [{ request_id: pendingId, state: 'pending' }]);

      // A blocking wait with a cursor from before the pruning, and the parked socket, wake on new mail.
      const pollsBefore = await activeWaits(server.url, 'message', 'poll');
      const requestPollsBefore = await activeWaits(server.url, 'request', 'poll');
      const blocking = callOk(reader, 'email_await', {
        event: { type: 'message_received', mailbox_id: retained },
        since_cursor: atEnd,
        timeout_seconds: 50,
      });
      const blockingRequest = callOk(reader, 'monitor_approval', { request_id: pendingId, timeout_seconds: 50 });
      await waitFor(
        'the blocking waits parked',
        async () =>
          (await activeWaits(server.url, 'message', 'poll')) === pollsBefore + 1 &&
          (await activeWaits(server.url, 'request', 'poll')) === requestPollsBefore + 1,
        { timeoutMs: 30_000 },
      );
      const m4 = await ingest(server.admin, retained, { subject: 'four' });
      assert.deepEqual(ids(await blocking), [m4]);
      assert.deepEqual(ids(await socketResult(messageSocket)), [m4]);

      assert.equal((await server.admin.post(`/v1/requests/${pendingId}/approve`, {})).status, 200);
      for (const result of [await blockingRequest, await socketResult(requestSocket)]) {
        assert.equal(result.matched, true);
        assert.deepEqual(result.requests, [{ request_id: pendingId, state: 'approved' }]);
        assert.equal(result.events[0].state, 'approved');
        assert.equal(result.events[0].previous_state, 'pending');
      }
    });
  });
});

describe('persisted waits with ALCARTA_WEBSOCKETS=off', () => {
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_WEBSOCKETS: 'off' } });
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('delivery "websocket" is invalid_request websocket_unavailable', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'x' });
    for (const [tool, args] of [
      ['email_await', { event: { type: 'message_received', mailbox_id: mailboxId } }],
      ['monitor_inbox', { mailbox_id: mailboxId }],
      ['monitor_approval', { request_id: requestId }],
    ] as const) {
      const error = await callError(agent, tool, { ...args, delivery: 'websocket' });
      assert.equal(error.error, 'invalid_request', tool);
      assert.equal(error.reason, 'websocket_unavailable', tool);
    }
    const [{ count }] = await server.db.query<{ count: string }>('SELECT count(*) FROM waits');
    assert.equal(count, '0');
  });

  it('"any" returns {delivery: "poll", wait_id, expires_at} and the wait_id can be polled', async () => {
    const t0 = Date.now();
    const d = await callOk(agent, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: 200,
      delivery: 'any',
    });
    const t1 = Date.now();
    assert.deepEqual(Object.keys(d).sort(), ['delivery', 'expires_at', 'wait_id']);
    assert.equal(d.delivery, 'poll');
    assert.match(d.wait_id, /^wt_[0-9A-Za-z]+$/);
    const expires = Date.parse(d.expires_at);
    assert.ok(expires >= t0 + 199_000 && expires <= t1 + 201_000, `expires_at ${d.expires_at}`);

    const polled = callOk(agent, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    await waitFor('the poll to park', async () => (await activeWaits(server.url, undefined, 'poll')) === 1, {
      timeoutMs: 30_000,
    });
    const messageId = await ingest(server.admin, mailboxId, { subject: 'no sockets here' });
    const result = await polled;
    assert.equal(result.matched, true);
    assert.deepEqual(ids(result), [messageId]);
  });

  it('"any" on a request wait that already matched: the wait_id answers at once', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'y' });
    assert.equal((await server.admin.post(`/v1/requests/${requestId}/reject`, {})).status, 200);
    const d = await callOk(agent, 'monitor_approval', { request_id: requestId, delivery: 'any', timeout_seconds: 600 });
    assert.equal(d.delivery, 'poll');
    assert.equal(d.websocket_url, undefined);
    const result = await callOk(agent, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    assert.equal(result.matched, true);
    assert.deepEqual(result.requests, [{ request_id: requestId, state: 'rejected' }]);
  });
});
