import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, openSocket, socketUrlOn } from '../support/wait-socket';
import { Replica, ReplicaSet } from '../support/replicas';

const ids = (result: { events: Array<{ message_id: string }> }) => result.events.map((e) => e.message_id);

/**
 * SPEC §4 and §6 with real server processes on one database: exactly one connection wins a ticket
 * race across replicas; a persisted wait survives the replica that created it (SIGTERM with an
 * open socket — which gets `shutdown: true` and close 1012 —, or SIGKILL) and is resolved by
 * another; a wait whose `expires_at` passes while no replica runs is resolved as timed out by the
 * next replica to start.
 */
describe('persisted waits across server processes', () => {
  const secret = randomSecret();
  let db: TestDatabase;
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;
  let mailboxId: string;

  const waitRow = async (waitId: string) =>
    (
      await db.query<{ status: string; expired: boolean }>(
        'SELECT status, expires_at < now() AS expired FROM waits WHERE id = $1',
        [waitId],
      )
    )[0];

  const messageWait = (replica: Replica, timeoutSeconds = 120) =>
    callOk(replica.client, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: timeoutSeconds,
      delivery: 'websocket',
    });

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret);
    a = await replicas.start('A'); // alone first: it runs the migrations
    b = await replicas.start('B');
    mailboxId = await createMailbox(a.admin);
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  it('of 12 connections racing for one ticket on two replicas, exactly one opens', async () => {
    const d = await messageWait(a);
    const urls = [a, b].map((r) => socketUrlOn(r.server.url, d.websocket_url));
    const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => openSocket(urls[i % 2])));
    const opened = outcomes.filter((o) => o.opened);
    assert.equal(opened.length, 1, 'exactly one winner across both replicas');
    for (const o of outcomes) {
      if (o.opened) continue;
      assert.equal(o.status, 410);
      assert.equal(o.body.error, 'invalid_request');
      assert.equal(o.body.reason, 'ticket_consumed');
    }
    const [winner] = opened;
    assert.deepEqual(await winner.frame(1), { type: 'ready', wait_id: d.wait_id });
    const messageId = await ingest(b.admin, mailboxId, { subject: 'to the winner' });
    assert.equal((await winner.closed).code, 1000);
    assert.deepEqual(ids(winner.frames[1]), [messageId]);

    // A proxy hop that stripped the upgrade headers: answered, and nothing logs the ticket.
    assert.equal((await fetch(urls[0].replace(/^ws/, 'http'))).status, 400);
    for (const r of [a, b]) assert.doesNotMatch(r.server.stdout() + r.server.stderr(), /wst_/, `${r.name} logs`);
  });

  it('SIGTERM with an open socket: shutdown result, close 1012, exit 0; another replica resolves the wait', async () => {
    const doomed = await replicas.start('C');
    const d = await messageWait(doomed);
    const socket = await openOk(socketUrlOn(doomed.server.url, d.websocket_url));
    assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: d.wait_id });
    await waitFor(
      'the socket to be parked',
      async () => (await activeWaits(doomed.server.url, 'message', 'websocket')) === 1,
      {
        timeoutMs: 30_000,
      },
    );

    await replicas.stop(doomed, 'SIGTERM');
    const { code } = await socket.closed;
    assert.equal(code, 1012);
    assert.equal(socket.frames.length, 2);
    const { type, next_cursor: cursor, ...rest } = socket.frames[1];
    assert.equal(type, 'result');
    assert.equal(typeof cursor, 'string');
    assert.equal(rest.shutdown, true);
    assert.equal(rest.timed_out, false);
    assert.equal(rest.matched, false);
    assert.deepEqual(rest.events, []);
    assert.equal((await waitRow(d.wait_id)).status, 'pending', 'the wait outlives the replica');

    const messageId = await ingest(b.admin, mailboxId, { subject: 'after C stopped' });
    const result = await callOk(b.client, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    assert.equal(result.matched, true);
    assert.deepEqual(ids(result), [messageId]);
  });

  it('a wait survives SIGKILL of the replica that created it; its URL and wait_id work on another', async () => {
    const doomed = await replicas.start('D');
    const { request_id: requestId } = await callOk(doomed.client, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Outlive your replica',
    });
    const d = await callOk(doomed.client, 'monitor_approval', {
      request_id: requestId,
      timeout_seconds: 3600,
      delivery: 'websocket',
    });
    await replicas.stop(doomed, 'SIGKILL');
    assert.equal((await waitRow(d.wait_id)).status, 'pending');

    const socket = await openOk(socketUrlOn(b.server.url, d.websocket_url));
    assert.equal((await b.admin.post(`/v1/requests/${requestId}/approve`, {})).status, 200);
    const result = await callOk(b.client, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    assert.equal(result.matched, true);
    assert.deepEqual(result.requests, [{ request_id: requestId, state: 'approved' }]);
    assert.equal((await socket.closed).code, 1000);
    const { type, ...delivered } = socket.frames[1];
    assert.equal(type, 'result');
    assert.deepEqual(delivered, result, 'socket and wait_id carry the same result');
  });

  it('a wait whose expires_at passed while no replica ran is resolved as timed out when one starts', async () => {
    for (const replica of [...replicas.running]) await replicas.stop(replica, 'SIGTERM');
    const creator = await replicas.start('E');
    const d = await messageWait(creator, 8);
    await replicas.stop(creator, 'SIGKILL');
    assert.equal((await waitRow(d.wait_id)).status, 'pending', 'nobody resolved it before it expired');
    await waitFor('expires_at to pass', async () => (await waitRow(d.wait_id)).expired, {
      timeoutMs: 60_000,
      intervalMs: 200,
    });

    const successor = await replicas.start('F');
    const result = await callOk(successor.client, 'email_await', { wait_id: d.wait_id, timeout_seconds: 60 });
    const { next_cursor: cursor, ...rest } = result;
    assert.deepEqual(rest, { matched: false, timed_out: true, shutdown: false, events: [] });
    assert.equal(typeof cursor, 'string');
    assert.equal((await waitRow(d.wait_id)).status, 'resolved');
  });
});
