import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk } from '../support/mcp';
import { activeWaits, metricValue } from '../support/metrics';
import { createMailbox, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, socketUrlOn } from '../support/wait-socket';
import { Replica, ReplicaSet, waitOwnerPid } from '../support/replicas';

/** Short, so that the takeover bound is tested in seconds. */
const RECHECK_SECONDS = 3;
/** Slack on top of the takeover bound, for a busy machine. */
const TAKEOVER_SLACK_MS = 2_500;

const ids = (result: { events: Array<{ message_id: string }> }) => result.events.map((e) => e.message_id);

/**
 * docs/operators.md "Capacity" with real server processes: the owner of a persisted wait that hangs
 * (SIGSTOP: the process lives and its database sessions stay open, so nothing but its lease tells
 * it is gone) is taken over within ALCARTA_WAIT_RECHECK_SECONDS, like a dead one; when it resumes
 * (SIGCONT) it learns that it lost its lease, watches nothing it no longer owns, and the result
 * another replica delivered stays the one stored and answered everywhere. Waits claimed at a
 * takeover catch up, all together, with what happened while nobody watched them.
 */
describe('wait lease of a hung replica', () => {
  const secret = randomSecret();
  let db: TestDatabase;
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;
  let mailboxId: string;

  const ownerOf = (waitId: string) => waitOwnerPid(db, waitId);
  /**
   * A replica renews its lease four times per re-check period, for half a period, once it sees
   * another replica's lease (alone, once per period, for two): wait until `pid` does.
   */
  const shortLease = (pid: string) =>
    waitFor(`${pid} to hold a short wait lease`, async () => {
      const rows = await db.query(
        `SELECT 1 FROM wait_owners WHERE id LIKE $1 AND lease_expires_at <= now() + $2 * interval '1 second'`,
        [`%:${pid}:%`, RECHECK_SECONDS / 2],
      );
      return rows.length === 1;
    });
  const storedResult = async (waitId: string) =>
    (await db.query<{ result: any }>('SELECT result FROM waits WHERE id = $1', [waitId]))[0].result;

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret, { ALCARTA_WAIT_RECHECK_SECONDS: String(RECHECK_SECONDS) });
    a = await replicas.start('A'); // alone first: it runs the migrations
    b = await replicas.start('B');
    mailboxId = await createMailbox(a.admin);
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  it('a SIGSTOPped owner is taken over within the re-check period; resumed, it changes no result', async () => {
    const pidOfA = String(a.server.pid);
    await shortLease(pidOfA);
    const d = await callOk(a.client, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: 120,
      delivery: 'websocket',
    });
    assert.equal(await ownerOf(d.wait_id), pidOfA);
    await waitFor('A to watch its wait', async () => (await activeWaits(a.server.url, 'message', 'persisted')) === 1);
    const socket = await openOk(socketUrlOn(b.server.url, d.websocket_url));
    assert.deepEqual(await socket.frame(1), { type: 'ready', wait_id: d.wait_id });

    process.kill(a.server.pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    let first: string;
    try {
      first = await ingest(b.admin, mailboxId, { subject: 'while A hangs' });
      const result = await socket.frame(2, RECHECK_SECONDS * 1000 + TAKEOVER_SLACK_MS);
      const elapsedMs = Date.now() - stoppedAt;
      assert.equal(result.type, 'result');
      assert.deepEqual(ids(result), [first]);
      assert.ok(
        elapsedMs <= RECHECK_SECONDS * 1000 + TAKEOVER_SLACK_MS,
        `delivered ${elapsedMs} ms after the owner hung`,
      );
      assert.equal((await socket.closed).code, 1000);
      // A second match while A still hangs: A's stale watch, from the same cursor, would now see two.
      await ingest(b.admin, mailboxId, { subject: 'also while A hangs' });
    } finally {
      process.kill(a.server.pid, 'SIGCONT');
    }

    await waitFor('A to learn that its lease was lost', async () => {
      return (await metricValue(a.server.url, 'alcarta_wait_lease_losses_total')) >= 1;
    });
    await waitFor(
      'A to watch nothing it does not own',
      async () => (await activeWaits(a.server.url, 'message', 'persisted')) === 0,
    );
    const { type, ...delivered } = socket.frames[1];
    assert.equal(type, 'result');
    assert.deepEqual(await storedResult(d.wait_id), delivered, 'the stored result is the one delivered');
    const polled = await callOk(a.client, 'email_await', { wait_id: d.wait_id, timeout_seconds: 5 });
    assert.deepEqual(polled, delivered, 'the resumed replica answers the same result');
    assert.deepEqual(ids(polled), [first]);
  });

  it('waits taken over catch up at the claim with what happened while nobody watched them', async () => {
    const second = await createMailbox(a.admin);
    const hung = await replicas.start('H');
    const pid = String(hung.server.pid);
    await shortLease(pid);
    const messageWaits: Array<{ waitId: string; mailbox: string }> = [];
    for (const mailbox of [mailboxId, second, mailboxId, second, mailboxId, second]) {
      const d = await callOk(hung.client, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailbox, subject_contains: 'unwatched' },
        timeout_seconds: 120,
        delivery: 'websocket',
      });
      messageWaits.push({ waitId: d.wait_id, mailbox });
    }
    const requestWaits: Array<{ waitId: string; requestId: string }> = [];
    for (let i = 0; i < 2; i++) {
      const { request_id: requestId } = await callOk(hung.client, 'request_approval', {
        mailbox_id: mailboxId,
        title: `Decided while nobody watched ${i}`,
      });
      const d = await callOk(hung.client, 'monitor_approval', {
        request_id: requestId,
        timeout_seconds: 120,
        delivery: 'websocket',
      });
      requestWaits.push({ waitId: d.wait_id, requestId });
    }
    for (const { waitId } of [...messageWaits, ...requestWaits]) assert.equal(await ownerOf(waitId), pid);

    process.kill(hung.server.pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    try {
      const messages = new Map<string, string>();
      for (const mailbox of [mailboxId, second]) {
        messages.set(mailbox, await ingest(b.admin, mailbox, { subject: 'unwatched news' }));
      }
      for (const { requestId } of requestWaits) {
        assert.equal((await b.admin.post(`/v1/requests/${requestId}/approve`, {})).status, 200);
      }
      const all = [...messageWaits, ...requestWaits].map((w) => w.waitId);
      await waitFor(
        'every wait of the hung replica to be taken over and resolved',
        async () => {
          const rows = await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM waits WHERE id = ANY($1::text[]) AND status = 'resolved'`,
            [all],
          );
          return rows[0].n === all.length;
        },
        { timeoutMs: RECHECK_SECONDS * 1000 + TAKEOVER_SLACK_MS, intervalMs: 50 },
      );
      assert.ok(Date.now() - stoppedAt <= RECHECK_SECONDS * 1000 + TAKEOVER_SLACK_MS);
      for (const { waitId, mailbox } of messageWaits) {
        const result = await callOk(b.client, 'email_await', { wait_id: waitId, timeout_seconds: 5 });
        assert.equal(result.matched, true);
        assert.deepEqual(ids(result), [messages.get(mailbox)]);
      }
      for (const { waitId, requestId } of requestWaits) {
        const result = await callOk(b.client, 'email_await', { wait_id: waitId, timeout_seconds: 5 });
        assert.equal(result.matched, true);
        assert.deepEqual(result.requests, [{ request_id: requestId, state: 'approved' }]);
      }
    } finally {
      process.kill(hung.server.pid, 'SIGKILL');
      await replicas.stop(hung, 'SIGKILL');
    }
  });
});
