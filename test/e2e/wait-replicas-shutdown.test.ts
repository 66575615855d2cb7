import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DrainState } from '#app/lifecycle/drain-state.js';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { Replica, ReplicaSet } from '../support/replicas';
import { scrubbed } from '../support/spawned-server';
import { createMailbox, ingest, randomSecret, startTestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const SHUTDOWN_RESULT = { matched: false, timed_out: false, shutdown: true, events: [] };

/**
 * docs/operators.md "Replicas and shutdown": replicas share one PostgreSQL, and a change committed
 * through any of them wakes the matching waits on every other one. On SIGTERM/SIGINT a replica
 * fails readiness, answers every blocked wait with `shutdown: true` within 1 s (message waits with
 * a next_cursor that another replica resumes from without losing anything), answers new waits the
 * same way, and exits 0.
 */
describe('waits across replicas and during graceful shutdown', () => {
  const secret = randomSecret();
  let db: TestDatabase;
  /** Re-checks every 30 s: the wakes these tests see are doorbells. */
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;

  const parked = (replica: Replica, n: number) =>
    waitFor(`${n} parked wait(s) on ${replica.name}`, async () => (await activeWaits(replica.server.url)) === n, {
      timeoutMs: 30_000,
    });

  const messageWait = (replica: Replica, event: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    callOk(replica.client, 'email_await', {
      event: { type: 'message_received', ...event },
      timeout_seconds: 50,
      ...extra,
    });

  const requestWait = (replica: Replica, requestId: string) =>
    callOk(replica.client, 'monitor_approval', { request_id: requestId, timeout_seconds: 50 });

  const newRequest = async (replica: Replica, mailboxId: string) =>
    (await callOk(replica.client, 'request_approval', { mailbox_id: mailboxId, title: 'Across replicas' }))
      .request_id as string;

  /** Resolves with the result and the moment it arrived. */
  const timed = <T>(promise: Promise<T>) => promise.then((result) => ({ result, at: Date.now() }));

  /** Stops a replica by `signal` with its waits parked; checks the exit status; returns when the signal was sent. */
  const signalled = async (replica: Replica, signal: NodeJS.Signals) => {
    const sent = Date.now();
    const code = await replica.server.stop(signal);
    assert.equal(code, 0, `${replica.name} exit status after ${signal}; stderr:\n${scrubbed(replica.server.stderr())}`);
    return sent;
  };

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret, { ALCARTA_WAIT_RECHECK_SECONDS: '30' });
    a = await replicas.start('A'); // first alone: it runs the migrations and creates the admin token
    b = await replicas.start('B');
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  for (const [from, through] of [
    ['A', 'B'],
    ['B', 'A'],
  ] as const) {
    it(`a wait parked on ${from} is woken by a change committed through ${through}`, async () => {
      const [waiting, writing] = from === 'A' ? [a, b] : [b, a];
      const mailboxId = await createMailbox(writing.admin);
      const requestId = await newRequest(writing, mailboxId);

      const forMail = timed(messageWait(waiting, { mailbox_id: mailboxId }));
      const forDecision = timed(requestWait(waiting, requestId));
      await parked(waiting, 2);

      const started = Date.now();
      const messageId = await ingest(writing.admin, mailboxId, { subject: `through ${through}` });
      const mail = await forMail;
      assert.equal(mail.result.matched, true);
      assert.deepEqual(
        mail.result.events.map((e: { message_id: string }) => e.message_id),
        [messageId],
      );
      const approved = await writing.admin.post(`/v1/requests/${requestId}/approve`, {});
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      const decision = await forDecision;
      assert.equal(decision.result.matched, true);
      assert.deepEqual(decision.result.requests, [{ request_id: requestId, state: 'approved' }]);
      // The other replica re-checks only every 30 s: this fast, it was the doorbell.
      const slowest = Math.max(mail.at, decision.at) - started;
      assert.ok(slowest < 15_000, `woken after ${slowest} ms`);
    });
  }

  it('SIGTERM answers every parked wait with shutdown within 1 s; cursors resume on another replica', async () => {
    const doomed = await replicas.start('C');
    const mailboxId = await createMailbox(b.admin);
    const earlier = await ingest(b.admin, mailboxId, { subject: 'before the waits' });
    const requestId = await newRequest(b, mailboxId);

    const oneMailbox = timed(messageWait(doomed, { mailbox_id: mailboxId }));
    const everyMailbox = timed(messageWait(doomed, {}));
    const decision = timed(requestWait(doomed, requestId));
    await parked(doomed, 3);

    const sent = await signalled(doomed, 'SIGTERM');
    const answers = await Promise.all([oneMailbox, everyMailbox, decision]);
    for (const { at } of answers) assert.ok(at - sent < 1000, `answered ${at - sent} ms after SIGTERM`);
    const [one, every, request] = answers.map((x) => x.result);
    for (const result of [one, every]) {
      const { next_cursor: cursor, ...rest } = result;
      assert.deepEqual(rest, SHUTDOWN_RESULT);
      assert.equal(typeof cursor, 'string');
    }
    assert.deepEqual(request, { ...SHUTDOWN_RESULT, requests: [{ request_id: requestId, state: 'pending' }] });

    // Committed after the shutdown; the cursors were cut before it, after `earlier`.
    const later = await ingest(b.admin, mailboxId, { subject: 'after the shutdown' });
    const resumedOne = await messageWait(b, { mailbox_id: mailboxId }, { since_cursor: one.next_cursor });
    const resumedEvery = await messageWait(b, {}, { since_cursor: every.next_cursor });
    for (const resumed of [resumedOne, resumedEvery]) {
      assert.equal(resumed.matched, true);
      assert.deepEqual(
        resumed.events.map((e: { message_id: string }) => e.message_id),
        [later],
        `exactly the message committed after the shutdown (not ${earlier})`,
      );
    }
    // A request wait is level-triggered: resumed anywhere, it sees a decision made meanwhile.
    assert.equal((await b.admin.post(`/v1/requests/${requestId}/approve`, {})).status, 200);
    const resumedRequest = await requestWait(b, requestId);
    assert.equal(resumedRequest.matched, true);
    assert.deepEqual(resumedRequest.requests, [{ request_id: requestId, state: 'approved' }]);
  });

  it('SIGINT does the same for a parked wait', async () => {
    const doomed = await replicas.start('D');
    const mailboxId = await createMailbox(b.admin);
    const wait = timed(messageWait(doomed, { mailbox_id: mailboxId }));
    await parked(doomed, 1);

    const sent = await signalled(doomed, 'SIGINT');
    const { result, at } = await wait;
    assert.ok(at - sent < 1000, `answered ${at - sent} ms after SIGINT`);
    const { next_cursor: cursor, ...rest } = result;
    assert.deepEqual(rest, SHUTDOWN_RESULT);

    const later = await ingest(b.admin, mailboxId, { subject: 'after SIGINT' });
    const resumed = await messageWait(b, { mailbox_id: mailboxId }, { since_cursor: cursor });
    assert.deepEqual(
      resumed.events.map((e: { message_id: string }) => e.message_id),
      [later],
    );
  });

  it('while draining, readiness fails at once and new waits answer shutdown at once', async () => {
    const server = await startTestServer({ db, adminToken: secret });
    const client = await connectMcp(server.url, secret);
    try {
      const mailboxId = await createMailbox(server.admin);
      const requestId = await newRequest(b, mailboxId);

      await server.running.app.get(DrainState).begin();
      const ready = await fetch(`${server.url}/health/ready`);
      assert.equal(ready.status, 503);
      const body = (await ready.json()) as { status: string; details: Record<string, { status: string }> };
      assert.equal(body.status, 'error');
      assert.equal(body.details.shutdown.status, 'down');

      const started = Date.now();
      const mail = await callOk(client, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailboxId },
        timeout_seconds: 50,
      });
      const { next_cursor: cursor, ...rest } = mail;
      assert.deepEqual(rest, SHUTDOWN_RESULT);
      assert.equal(typeof cursor, 'string');
      const decision = await callOk(client, 'monitor_approval', { request_id: requestId, timeout_seconds: 50 });
      assert.deepEqual(decision, { ...SHUTDOWN_RESULT, requests: [{ request_id: requestId, state: 'pending' }] });
      assert.ok(Date.now() - started < 5000, 'the new waits did not block');
    } finally {
      await client.close();
      await server.close({ keepDatabase: true });
    }
  });
});
