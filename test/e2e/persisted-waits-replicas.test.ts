import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk } from '../support/mcp';
import { activeWaits, metricValue } from '../support/metrics';
import { createMailbox, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, openSocket, socketUrlOn } from '../support/wait-socket';
import { Replica, ReplicaSet, waitOwnerPid } from '../support/replicas';

const ids = (result: { events: Array<{ message_id: string }> }) => result.events.map((e) => e.message_id);

/** ALCARTA_WAIT_RECHECK_SECONDS of these servers (the default): a dead owner's waits are taken over within it. */
const RECHECK_SECONDS = 15;
/** Slack on top of the takeover bound, for a busy machine. */
const TAKEOVER_SLACK_MS = 5_000;

/**
 * docs/agents.md "Waits" and docs/operators.md "Replicas and shutdown" with real server processes
 * on one database: exactly one connection wins a ticket race across replicas; a persisted wait
 * survives the replica that created it (SIGTERM with an open socket — which gets `shutdown: true`
 * and close 1012 —, or SIGKILL) and is resolved by another; a wait whose `expires_at` passes while
 * no replica runs is resolved as timed out by the next replica to start. docs/operators.md
 * "Capacity": a pending wait is watched by one replica (its owner) while any replica delivers it; a
 * SIGKILLed owner's waits are taken over within ALCARTA_WAIT_RECHECK_SECONDS, a SIGTERMed one hands
 * them over at once; a burst of results is written in a few batches.
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

  const ownerOf = (waitId: string) => waitOwnerPid(db, waitId);
  const pidOf = (replica: Replica) => String(replica.server.pid);
  /** A replica takes its wait lease just after it starts; waits it stores before that are unowned. */
  const leaseTaken = (replica: Replica) =>
    waitFor(`${replica.name} to hold its wait lease`, async () => {
      const rows = await db.query('SELECT 1 FROM wait_owners WHERE id LIKE $1', [`%:${pidOf(replica)}:%`]);
      return rows.length === 1;
    });

  /** Persisted waits watched over all running replicas. */
  const watchedEverywhere = async () => {
    let total = 0;
    for (const r of replicas.running) total += await activeWaits(r.server.url, undefined, 'persisted');
    return total;
  };
  const pendingWaits = async () =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM waits WHERE status = 'pending'`))[0].n;

  const sumOver = async (metric: string) => {
    let total = 0;
    for (const r of replicas.running) total += await metricValue(r.server.url, metric);
    return total;
  };

  const messageWait = (replica: Replica, timeoutSeconds = 120) =>
    callOk(replica.client, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: timeoutSeconds,
      delivery: 'websocket',
    });

  before(async () => {
    db = await createTestDatabase();
    // Two hundred waits are opened in a burst below: the per-token rate limit must not refuse them.
    replicas = new ReplicaSet(db.url, secret, { ALCARTA_RATE_LIMIT_PER_SECOND: '1000' });
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

  it('a pending wait is watched by one replica, its owner; a socket on the other replica delivers it', async () => {
    await leaseTaken(a);
    const d = await messageWait(a);
    assert.equal(await ownerOf(d.wait_id), pidOf(a), 'the replica that stored the wait owns it');
    await waitFor('every pending wait to be watched exactly once', async () => {
      const [watched, pending] = [await watchedEverywhere(), await pendingWaits()];
      return watched === pending && pending >= 1;
    });
    assert.equal(await activeWaits(b.server.url, 'message', 'persisted'), 0, 'B watches nothing it does not own');

    const socket = await openOk(socketUrlOn(b.server.url, d.websocket_url));
    assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: d.wait_id });
    const messageId = await ingest(a.admin, mailboxId, { subject: 'owned by A, delivered by B' });
    assert.equal((await socket.closed).code, 1000);
    assert.deepEqual(ids(socket.frames[1]), [messageId]);
    assert.equal(await ownerOf(d.wait_id), null, 'a resolved wait has no owner');
  });

  it('SIGTERM with an open socket: shutdown result, close 1012, exit 0; another replica resolves the wait', async () => {
    const doomed = await replicas.start('C');
    await leaseTaken(doomed);
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

    assert.equal(await ownerOf(d.wait_id), pidOf(doomed));

    await replicas.stop(doomed, 'SIGTERM');
    // Handed over at once: released on drain, claimed on the doorbell, long before a lease could lapse.
    await waitFor(
      'another replica to own the wait',
      async () => [pidOf(a), pidOf(b)].includes((await ownerOf(d.wait_id))!),
      {
        timeoutMs: 3_000,
        intervalMs: 50,
      },
    );
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
    await leaseTaken(doomed);
    const { request_id: requestId } = await callOk(doomed.client, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Outlive your replica',
    });
    const d = await callOk(doomed.client, 'monitor_approval', {
      request_id: requestId,
      timeout_seconds: 3600,
      delivery: 'websocket',
    });
    assert.equal(await ownerOf(d.wait_id), pidOf(doomed));
    const killedAt = Date.now();
    await replicas.stop(doomed, 'SIGKILL');
    assert.equal((await waitRow(d.wait_id)).status, 'pending');
    await waitFor(
      'a surviving replica to take the wait over',
      async () => [pidOf(a), pidOf(b)].includes((await ownerOf(d.wait_id))!),
      { timeoutMs: RECHECK_SECONDS * 1000 + TAKEOVER_SLACK_MS, intervalMs: 100 },
    );
    assert.ok(Date.now() - killedAt <= RECHECK_SECONDS * 1000 + TAKEOVER_SLACK_MS);
    await waitFor(
      'every pending wait to be watched exactly once',
      async () => (await watchedEverywhere()) === (await pendingWaits()),
    );

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

  it('one ingest resolves 200 websocket waits in a few batches; sockets on both replicas deliver', async () => {
    const count = 200;
    await leaseTaken(b);
    const batchesBefore = await sumOver('alcarta_wait_resolution_batches_total');
    const resolvedBefore = await sumOver('alcarta_wait_resolutions_total');
    const waits = [];
    for (let i = 0; i < count; i += 20) {
      const chunk = Array.from({ length: 20 }, (_, j) => messageWait((i + j) % 2 === 0 ? a : b));
      waits.push(...(await Promise.all(chunk)));
    }
    const sockets = await Promise.all(
      waits.map((d, i) => openOk(socketUrlOn((i % 3 === 0 ? a : b).server.url, d.websocket_url))),
    );
    for (const [i, socket] of sockets.entries())
      assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: waits[i].wait_id });
    await waitFor('every wait to be watched exactly once', async () => (await watchedEverywhere()) === count);

    const messageId = await ingest(a.admin, mailboxId, { subject: 'wakes two hundred' });
    for (const socket of sockets) {
      assert.equal((await socket.closed).code, 1000);
      assert.deepEqual(ids(socket.frames[1]), [messageId]);
    }
    assert.equal((await sumOver('alcarta_wait_resolutions_total')) - resolvedBefore, count);
    // One batch per owner is the expectation; a busy machine may split a burst over a few ticks.
    const batches = (await sumOver('alcarta_wait_resolution_batches_total')) - batchesBefore;
    assert.ok(batches <= 10, `${count} waits resolved in ${batches} transactions`);
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
