import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk } from '../support/mcp';
import { Replica, ReplicaSet } from '../support/replicas';
import { headerOf, TestSmtpRelay } from '../support/smtp-relay';
import { createMailbox, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/** The lease of a claim; one attempt is cut off after half of it. */
const LEASE_SECONDS = 8;

/**
 * "any replica delivers queued mail, each message claimed by one replica at a time; a crash before
 * the relay's answer means it is sent again" (docs/mail.md): real server processes on one database
 * and a real relay (aiosmtpd). While both replicas are healthy every message arrives exactly once;
 * when the replica sending a message is SIGKILLed mid-delivery, the other delivers it after the
 * lease.
 */
describe('outbox across server processes', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  const secret = randomSecret();
  let db: TestDatabase;
  let relay: TestSmtpRelay;
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;
  let mailboxId: string;

  const delivery = async (messageId: string) =>
    (
      await db.query<{ status: string; attempts: number; claimed_by: string | null }>(
        'SELECT status, attempts, claimed_by FROM outbound_deliveries WHERE message_id = $1',
        [messageId],
      )
    )[0];

  /** send_email through `via`'s MCP endpoint, approved through its REST API: the outbound message id. */
  const sendApproved = async (via: Replica, subject: string): Promise<string> => {
    const { request_id: requestId } = await callOk(via.client, 'send_email', {
      mailbox_id: mailboxId,
      to: ['recipient@example.net'],
      subject,
      text: `Body of ${subject}`,
    });
    const res = await via.admin.post(`/v1/requests/${requestId}/approve`, {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.sent_message_id as string;
  };

  before(async () => {
    db = await createTestDatabase();
    relay = await TestSmtpRelay.start();
    replicas = new ReplicaSet(db.url, secret, {
      ALCARTA_SMTP_PORT: 'off',
      ALCARTA_SMTP_RELAY_URL: relay.url,
      ALCARTA_OUTBOX_LEASE_SECONDS: String(LEASE_SECONDS),
      ALCARTA_SMTP_RETRY_BASE_SECONDS: '1',
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_LOG_LEVEL: 'warn',
    });
    a = await replicas.start('A'); // alone first: it runs the migrations
    b = await replicas.start('B');
    mailboxId = await createMailbox(a.admin, `replicas-${process.pid}@outbox.example`);
  });

  after(async () => {
    await replicas?.stopAll();
    await relay?.stop();
    await db?.drop();
  });

  it('delivers every one of many messages exactly once while both replicas are healthy', async () => {
    const count = 24;
    const ids = await Promise.all(
      Array.from({ length: count }, (_, i) => sendApproved(i % 2 === 0 ? a : b, `Healthy ${i}`)),
    );
    await waitFor(
      'every message to be sent',
      async () => {
        const rows = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM outbound_deliveries WHERE message_id = ANY($1) AND status = 'sent'`,
          [ids],
        );
        return rows[0].n === count;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const headers = await db.query<{ id: string; message_id_header: string }>(
      'SELECT id, message_id_header FROM messages WHERE id = ANY($1)',
      [ids],
    );
    const received = (await relay.received()).map((m) => headerOf(m.raw, 'message-id'));
    for (const { id, message_id_header: header } of headers) {
      assert.equal(received.filter((h) => h === header).length, 1, `${id} received once`);
      assert.equal((await delivery(id)).attempts, 1, `${id} took one attempt`);
    }
    assert.equal(received.length, count);
    // The replicas' own counts agree: one successful attempt per message in all, no claim lost.
    const attempts = async (replica: Replica, outcome: string) => {
      const text = await (await fetch(new URL('/metrics', replica.server.url))).text();
      const m = new RegExp(`^alcarta_outbox_send_attempts_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text);
      return m ? Number(m[1]) : 0;
    };
    assert.equal((await attempts(a, 'sent')) + (await attempts(b, 'sent')), count);
    assert.equal((await attempts(a, 'lost_claim')) + (await attempts(b, 'lost_claim')), 0);
    const claims = await db.query(`SELECT 1 FROM outbound_deliveries WHERE claimed_by IS NOT NULL`);
    assert.equal(claims.length, 0, 'no claim is left behind');
  });

  it('delivers a message through the other replica when the sending one is SIGKILLed mid-delivery', async () => {
    await relay.setMode('hold');
    const before = (await relay.received()).length;
    const messageId = await sendApproved(a, 'Killed mid-delivery');
    await waitFor('the relay to hold the message', async () => (await relay.held()) === 1);
    const claim = await delivery(messageId);
    assert.equal(claim.status, 'sending');
    const holderPid = Number(claim.claimed_by!.split('/')[1]);
    const holder = [a, b].find((r) => r.server.pid === holderPid);
    assert.ok(holder, `the claim ${claim.claimed_by} names one of the replicas`);
    const survivor = holder === a ? b : a;
    await replicas.stop(holder, 'SIGKILL');
    // The relay dropped the DATA of the dead connection; the next attempt is answered normally.
    await waitFor('the held DATA to be dropped', async () => (await relay.held()) === 0);
    await relay.setMode('accept');

    const sent = await waitFor(
      'the other replica to deliver it after the lease lapsed',
      async () => {
        const d = await delivery(messageId);
        return d.status === 'sent' ? d : undefined;
      },
      { timeoutMs: (LEASE_SECONDS + 20) * 1000, intervalMs: 100 },
    );
    assert.equal(sent.attempts, 2);
    const header = (await callOk(survivor.client, 'get_message', { message_id: messageId })).message_id_header;
    const received = await relay.received();
    assert.equal(received.length, before + 1);
    assert.equal(headerOf(received[received.length - 1].raw, 'message-id'), header);
    const events = await db.query<{ status: string }>(
      `SELECT payload->>'status' AS status FROM events WHERE type = 'message_delivery_changed' AND message_id = $1 ORDER BY id`,
      [messageId],
    );
    // The take-over is no status change: queued, sending (by the dead replica), sent (by the other).
    assert.deepEqual(
      events.map((e) => e.status),
      ['queued', 'sending', 'sent'],
    );
  });

  it('cuts an attempt off well before its lease lapses, and retries it', async () => {
    await relay.setMode('hold');
    const before = (await relay.received()).length;
    // One replica is left after the previous test.
    const messageId = await sendApproved(replicas.running[0], 'Held too long');
    await waitFor('the relay to hold the message', async () => (await relay.held()) === 1);
    const retrying = await waitFor(
      'the attempt to time out',
      async () => {
        const rows = await db.query<{ status: string; error: string; attempts: number }>(
          `SELECT status, error, attempts FROM outbound_deliveries WHERE message_id = $1`,
          [messageId],
        );
        return rows[0].status === 'retrying' ? rows[0] : undefined;
      },
      { timeoutMs: (LEASE_SECONDS + 20) * 1000, intervalMs: 100 },
    );
    assert.match(retrying.error, /timed out after 4 s/);
    assert.equal(retrying.attempts, 1);
    await relay.setMode('accept');
    await waitFor('the retry to be sent', async () => (await delivery(messageId)).status === 'sent', {
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    // The cut-off attempt's DATA was dropped with its connection: the message arrived once.
    const received = await relay.received();
    assert.equal(received.length, before + 1);
  });
});
