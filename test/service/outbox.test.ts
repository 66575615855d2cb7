import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApprovalService } from '#app/approvals/approval.service.js';
import { Caller } from '#app/kernel/caller.js';
import { OutboxService } from '#app/outbox/outbox.service.js';
import { SmtpRelay } from '#app/outbox/smtp-relay.js';
import { refused, ServiceTier, startServiceTier } from '../support/service-tier';

const RETRY_BASE_SECONDS = 60;

/**
 * OutboxService: an approved email and its delivery commit together; replicas claim due deliveries
 * with SKIP LOCKED, so each attempt belongs to one of them; an attempt is recorded only by the
 * replica that still holds the claim; temporary failures back off until the retry window closes;
 * and nothing leaves that is not what a person approved. The worker's loop is not run here (the
 * relay reports itself unconfigured, so it never starts): the tests play the workers through the
 * service's own claim and record steps.
 */
describe('OutboxService', () => {
  let tier: ServiceTier;
  let outbox: OutboxService;
  let approvals: ApprovalService;
  let mailbox: string;
  let agent: Caller;
  let person: Caller;
  let admin: Caller;

  before(async () => {
    tier = await startServiceTier({
      env: {
        ALCARTA_SMTP_RELAY_URL: 'smtp://127.0.0.1:9',
        ALCARTA_SMTP_RETRY_BASE_SECONDS: String(RETRY_BASE_SECONDS),
        ALCARTA_SMTP_RETRY_MAX_SECONDS: '3600',
      },
      override: (builder) =>
        builder.overrideProvider(SmtpRelay).useValue({
          configured: false,
          attemptTimeoutMs: 1000,
          send: () => Promise.reject(new Error('the service tier sends nothing')),
          close: () => undefined,
        }),
    });
    outbox = tier.get(OutboxService);
    approvals = tier.get(ApprovalService);
    mailbox = await tier.mailbox();
    agent = await tier.caller(['mail:send', 'mail:read', 'approvals:read'], [mailbox]);
    person = await tier.caller(['approvals:decide', 'approvals:read'], [mailbox]);
    admin = await tier.caller(['admin'], [mailbox]);
  });
  after(() => tier?.close());

  /** An approved email; returns its request and outbound message ids. */
  async function approvedEmail(subject = 'Quote') {
    const { request_id } = await approvals.requestEmail(agent, {
      mailboxId: mailbox,
      to: ['customer@example.net'],
      subject,
      text: `About ${subject}.`,
    });
    const approved = await approvals.decide(person, request_id, 'approved', null);
    assert.equal(approved.delivery?.status, 'queued');
    return { requestId: request_id, messageId: approved.sent_message_id! };
  }

  const row = async (messageId: string) =>
    (
      await tier.db.query<{ status: string; attempts: number; claimed_by: string | null; reason: string | null }>(
        `SELECT status, attempts, claimed_by, reason FROM outbound_deliveries WHERE message_id = $1`,
        [messageId],
      )
    )[0];

  const deliveryEvents = (messageId: string) =>
    tier.db
      .query<{ status: string }>(
        `SELECT payload->>'status' AS status FROM events WHERE message_id = $1 AND type = 'message_delivery_changed' ORDER BY id`,
        [messageId],
      )
      .then((rows) => rows.map((r) => r.status));

  /** Ends every claimed attempt as sent, so that the next test starts with nothing due. */
  async function settle(replicaId: string, messageIds: readonly string[]) {
    for (const id of messageIds)
      assert.equal(await outbox.recordOutcome(replicaId, id, { kind: 'sent', response: '250 ok' }), 'sent');
  }

  it('the delivery is queued in the approving transaction, announced, and listed for the mailbox only', async () => {
    const { requestId, messageId } = await approvedEmail();
    assert.deepEqual(await deliveryEvents(messageId), ['queued']);
    const listed = (await outbox.list(admin, 'queued', 50)).deliveries.find((d) => d.message_id === messageId);
    assert.equal(listed?.request_id, requestId);

    const outsider = await tier.caller(['admin'], [await tier.mailbox()]);
    assert.equal((await outbox.list(outsider, undefined, 50)).deliveries.length, 0);
    await refused(outbox.retry(outsider, messageId), 'not_found', 'message_not_found');

    const [claimed] = await outbox.claim('replica-a', 10);
    assert.equal(claimed.delivery.messageId, messageId);
    await settle('replica-a', [messageId]);
  });

  it('a row another transaction holds is skipped, not waited for; it is claimable once released', async () => {
    const [held, free1, free2] = [
      await approvedEmail('held'),
      await approvedEmail('free 1'),
      await approvedEmail('free 2'),
    ];
    await tier.db.query('BEGIN');
    try {
      await tier.db.query(`SELECT 1 FROM outbound_deliveries WHERE message_id = $1 FOR UPDATE`, [held.messageId]);
      const first = (await outbox.claim('replica-a', 10)).map((c) => c.delivery.messageId);
      assert.deepEqual(new Set(first), new Set([free1.messageId, free2.messageId]));
      assert.deepEqual(await outbox.claim('replica-b', 10), []);
    } finally {
      await tier.db.query('COMMIT');
    }
    const second = (await outbox.claim('replica-b', 10)).map((c) => c.delivery.messageId);
    assert.deepEqual(second, [held.messageId]);
    assert.equal((await row(held.messageId)).claimed_by, 'replica-b');
    await settle('replica-a', [free1.messageId, free2.messageId]);
    await settle('replica-b', [held.messageId]);
  });

  it('two replicas claiming at once split the due deliveries: each is claimed once', async () => {
    const ids = [];
    for (let i = 0; i < 8; i++) ids.push((await approvedEmail(`split ${i}`)).messageId);
    const byReplica = new Map<string, string[]>([
      ['replica-a', []],
      ['replica-b', []],
    ]);
    for (;;) {
      const rounds = await Promise.all(
        [...byReplica.keys()].map(async (replica) => {
          const claimed = await outbox.claim(replica, 3);
          byReplica.get(replica)!.push(...claimed.map((c) => c.delivery.messageId));
          return claimed.length;
        }),
      );
      if (rounds.every((n) => n === 0)) break;
    }
    const all = [...byReplica.values()].flat();
    assert.equal(all.length, ids.length);
    assert.deepEqual(new Set(all), new Set(ids));
    for (const id of ids) assert.equal((await row(id)).attempts, 1);
    for (const [replica, claimed] of byReplica) await settle(replica, claimed);
  });

  it('a lapsed claim is taken over; the replica that lost it records nothing', async () => {
    const { messageId } = await approvedEmail('takeover');
    await outbox.claim('replica-a', 10);
    await tier.db.query(
      `UPDATE outbound_deliveries SET lease_expires_at = now() - interval '1 second' WHERE message_id = $1`,
      [messageId],
    );
    const [taken] = await outbox.claim('replica-b', 10);
    assert.equal(taken.delivery.messageId, messageId);
    assert.equal(taken.previousStatus, 'sending');

    assert.equal(await outbox.recordOutcome('replica-a', messageId, { kind: 'sent', response: '250 late' }), undefined);
    assert.equal(await outbox.recordOutcome('replica-b', messageId, { kind: 'sent', response: '250 ok' }), 'sent');
    const [delivery] = (await outbox.deliveriesOf([messageId])).values();
    assert.deepEqual([delivery.status, delivery.attempts, delivery.response], ['sent', 2, '250 ok']);
    // The takeover is no status change: one `sending`, then `sent`.
    assert.deepEqual(await deliveryEvents(messageId), ['queued', 'sending', 'sent']);
  });

  it('a temporary failure backs off; a 5xx fails at once (relay_refused); an admin retry queues it again', async () => {
    const { messageId } = await approvedEmail('flaky');
    await outbox.claim('replica-a', 10);
    const failedAt = Date.now();
    assert.equal(
      await outbox.recordOutcome('replica-a', messageId, { kind: 'temporary', error: '451 try later' }),
      'retrying',
    );
    const [retrying] = (await outbox.deliveriesOf([messageId])).values();
    assert.equal(retrying.error, '451 try later');
    // Equal jitter: at least half the base delay, at most all of it.
    const delay = Date.parse(retrying.next_attempt_at!) - failedAt;
    assert.ok(
      delay >= (RETRY_BASE_SECONDS * 1000) / 2 - 1000 && delay <= RETRY_BASE_SECONDS * 1000 + 1000,
      `${delay} ms`,
    );
    assert.deepEqual(await outbox.claim('replica-a', 10), [], 'not due before its time');

    await tier.db.query(`UPDATE outbound_deliveries SET next_attempt_at = now() WHERE message_id = $1`, [messageId]);
    await outbox.claim('replica-a', 10);
    assert.equal(
      await outbox.recordOutcome('replica-a', messageId, { kind: 'permanent', error: '550 no such user' }),
      'failed',
    );
    assert.equal((await row(messageId)).reason, 'relay_refused');

    const retried = await outbox.retry(admin, messageId);
    assert.equal(retried.status, 'queued');
    assert.equal(retried.reason, undefined);
    await refused(outbox.retry(admin, messageId), 'conflict', 'delivery_not_failed');
    await outbox.claim('replica-a', 10);
    await settle('replica-a', [messageId]);
  });

  it('past the retry window a temporary failure is final: retries_exhausted', async () => {
    const { messageId } = await approvedEmail('old');
    await tier.db.query(`UPDATE outbound_deliveries SET queued_at = now() - interval '2 hours' WHERE message_id = $1`, [
      messageId,
    ]);
    await outbox.claim('replica-a', 10);
    assert.equal(await outbox.recordOutcome('replica-a', messageId, { kind: 'temporary', error: 'timeout' }), 'failed');
    const [failed] = (await outbox.deliveriesOf([messageId])).values();
    assert.equal(failed.reason, 'retries_exhausted');
    assert.match(failed.error!, /no more retries after 1 attempts/);
  });

  it('before a send, a message that is not the approved content is refused with content_changed', async () => {
    const intact = await approvedEmail('intact');
    const changed = await approvedEmail('changed');
    await tier.db.query(`UPDATE messages SET text_body = 'Pay to another account.' WHERE id = $1`, [changed.messageId]);
    const claimed = await outbox.claim('replica-a', 10);
    assert.equal(claimed.length, 2);
    for (const { delivery } of claimed) {
      const refusal = await outbox.refusalOf(delivery.message!, delivery.requestId);
      if (delivery.messageId === intact.messageId) {
        assert.equal(refusal, undefined);
        await settle('replica-a', [intact.messageId]);
      } else {
        assert.equal(refusal?.reason, 'content_changed');
        // A message no approved request accounts for is refused the same way.
        assert.equal((await outbox.refusalOf(delivery.message!, null))?.reason, 'content_changed');
        assert.equal(await outbox.recordOutcome('replica-a', delivery.messageId, refusal), 'failed');
      }
    }
    assert.equal((await row(changed.messageId)).reason, 'content_changed');
  });
});
