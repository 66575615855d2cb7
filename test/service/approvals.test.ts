import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApprovalService, MAX_EXPIRY_SECONDS } from '#app/approvals/approval.service.js';
import { Caller } from '#app/kernel/caller.js';
import { AlcartaError } from '#app/kernel/errors.js';
import { MessageService } from '#app/mail/message.service.js';
import { inbound, refused, ServiceTier, startServiceTier } from '../support/service-tier';

/**
 * The approval state machine as ApprovalService keeps it: pending → approved | rejected | expired |
 * cancelled, each transition once, never by the credential that asked (except cancelling), only
 * of the content the person saw, and only within the caller's mailboxes.
 */
describe('ApprovalService', () => {
  let tier: ServiceTier;
  let approvals: ApprovalService;
  let mailbox: string;
  let otherMailbox: string;
  let agent: Caller;
  let person: Caller;
  let outsider: Caller;

  before(async () => {
    tier = await startServiceTier();
    approvals = tier.get(ApprovalService);
    mailbox = await tier.mailbox();
    otherMailbox = await tier.mailbox();
    agent = await tier.caller(['mail:read', 'mail:send', 'approvals:read'], [mailbox]);
    person = await tier.caller(['approvals:read', 'approvals:decide'], [mailbox]);
    outsider = await tier.caller(['approvals:read', 'approvals:decide'], [otherMailbox]);
  });
  after(() => tier?.close());

  const ask = (title = 'Pay the invoice') => approvals.requestApproval(agent, { mailboxId: mailbox, title });

  const stateEvents = (requestId: string) =>
    tier.db.query<{ state: string; previous_state: string | null }>(
      `SELECT payload->>'state' AS state, payload->>'previous_state' AS previous_state
         FROM events WHERE request_id = $1 AND type = 'request_state_changed' ORDER BY id`,
      [requestId],
    );

  it('a decision moves a pending request once; every later one is request_not_pending naming the state', async () => {
    const { request_id: id, state } = await ask();
    assert.equal(state, 'pending');

    const approved = await approvals.decide(person, id, 'approved', 'fine');
    assert.equal(approved.state, 'approved');
    assert.equal(approved.decided_by, person.tokenId);
    assert.equal(approved.reason, 'fine');

    for (const decision of ['approved', 'rejected', 'cancelled'] as const) {
      const err = await refused(
        decision === 'cancelled' ? approvals.cancel(agent, id) : approvals.decide(person, id, decision, null),
        'conflict',
        'request_not_pending',
      );
      assert.equal(err.details.state, 'approved');
    }
    assert.equal((await approvals.get(person, id)).state, 'approved');
    assert.deepEqual(await stateEvents(id), [
      { state: 'pending', previous_state: null },
      { state: 'approved', previous_state: 'pending' },
    ]);
  });

  it('concurrent decisions on one request: exactly one applies, under the row lock', async () => {
    const { request_id: id } = await ask();
    const outcomes = await Promise.allSettled([
      approvals.decide(person, id, 'approved', null),
      approvals.decide(person, id, 'rejected', null),
      approvals.cancel(agent, id),
      approvals.decide(person, id, 'approved', null),
    ]);
    const applied = outcomes.filter((o) => o.status === 'fulfilled');
    assert.equal(applied.length, 1);
    for (const o of outcomes) {
      if (o.status === 'rejected') assert.equal((o.reason as AlcartaError).reason, 'request_not_pending');
    }
    assert.equal((await stateEvents(id)).length, 2);
  });

  it('the credential that asked cannot approve or reject (self_approval) but may cancel', async () => {
    const { request_id: id } = await ask();
    await refused(approvals.decide(agent, id, 'approved', null), 'forbidden', 'self_approval');
    await refused(approvals.decide(agent, id, 'rejected', null), 'forbidden', 'self_approval');
    assert.equal((await approvals.get(person, id)).state, 'pending');

    const withRequester = await approvals.getWithRequester(agent, id);
    assert.equal(withRequester.created_by, agent.tokenId);
    assert.equal(withRequester.requested_by_caller, true);
    assert.equal((await approvals.getWithRequester(person, id)).requested_by_caller, false);

    assert.equal((await approvals.cancel(agent, id)).state, 'cancelled');
  });

  it('a decision of other content than the request holds is content_changed and changes nothing', async () => {
    const { request_id: id } = await ask();
    const seen = (await approvals.get(person, id)).content_sha256;
    const stale = 'a'.repeat(64);
    assert.notEqual(seen, stale);

    await refused(
      approvals.decide(person, id, 'approved', null, { contentSha256: stale }),
      'conflict',
      'content_changed',
    );
    await refused(
      approvals.decide(person, id, 'rejected', null, { contentSha256: stale }),
      'conflict',
      'content_changed',
    );
    await refused(
      approvals.decide(person, id, 'approved', null, { hashRequired: true }),
      'invalid_request',
      'invalid_content_sha256',
    );
    assert.equal((await approvals.get(person, id)).state, 'pending');

    const approved = await approvals.decide(person, id, 'approved', null, { contentSha256: seen, hashRequired: true });
    assert.equal(approved.state, 'approved');
  });

  it('a stored request changed behind the service cannot be approved, only rejected', async () => {
    const tampered = (await ask('Pay 10 EUR')).request_id;
    await tier.db.query(`UPDATE approval_requests SET title = 'Pay 10000 EUR' WHERE id = $1`, [tampered]);
    await refused(approvals.decide(person, tampered, 'approved', null), 'conflict', 'content_changed');
    assert.equal((await approvals.decide(person, tampered, 'rejected', 'changed')).state, 'rejected');
  });

  it("other mailboxes' requests are not_found, exactly like unknown ids, and never listed", async () => {
    const { request_id: id } = await ask();
    const unknown = await refused(approvals.get(outsider, 'chk_doesnotexist'), 'not_found', 'request_not_found');
    const hidden = await refused(approvals.get(outsider, id), 'not_found', 'request_not_found');
    assert.equal(hidden.message.replace(id, 'ID'), unknown.message.replace('chk_doesnotexist', 'ID'));
    await refused(approvals.decide(outsider, id, 'approved', null), 'not_found', 'request_not_found');
    await refused(approvals.cancel(outsider, id), 'not_found', 'request_not_found');
    await refused(
      approvals.requestApproval(outsider, { mailboxId: mailbox, title: 'x' }),
      'not_found',
      'mailbox_not_found',
    );

    const visible = (await approvals.list(outsider, { limit: 100 })).requests.map((r) => r.request_id);
    assert.ok(!visible.includes(id));
    assert.ok((await approvals.list(person, { limit: 100 })).requests.some((r) => r.request_id === id));
    assert.equal((await approvals.get(person, id)).state, 'pending');
  });

  describe('expiry', () => {
    const overdue = (id: string) =>
      tier.db.query(`UPDATE approval_requests SET expires_at = now() - interval '1 second' WHERE id = $1`, [id]);

    it('expires_in_seconds above seven days is refused, never clamped', async () => {
      const err = await refused(
        approvals.requestApproval(agent, { mailboxId: mailbox, title: 'x', expiresInSeconds: MAX_EXPIRY_SECONDS + 1 }),
        'invalid_request',
        'expiry_exceeds_limit',
      );
      assert.equal(err.details.max_expires_in_seconds, MAX_EXPIRY_SECONDS);
      const created = await approvals.requestApproval(agent, {
        mailboxId: mailbox,
        title: 'x',
        expiresInSeconds: MAX_EXPIRY_SECONDS,
      });
      const { created_at } = await approvals.get(person, created.request_id);
      assert.equal(Date.parse(created.expires_at) - Date.parse(created_at), MAX_EXPIRY_SECONDS * 1000);
    });

    it('a late decision never wins over the deadline: the request expires instead', async () => {
      const { request_id: id } = await ask();
      await overdue(id);
      const err = await refused(approvals.decide(person, id, 'approved', null), 'conflict', 'request_not_pending');
      assert.equal(err.details.state, 'expired');
      assert.deepEqual((await stateEvents(id)).at(-1), { state: 'expired', previous_state: 'pending' });
    });

    it('reading an overdue request expires it; the sweep expires the rest, each once', async () => {
      const read = (await ask()).request_id;
      const swept = (await ask()).request_id;
      await overdue(read);
      await overdue(swept);
      assert.equal((await approvals.get(person, read)).state, 'expired');
      assert.equal(await approvals.expireOverdue(), 1);
      assert.equal(await approvals.expireOverdue(), 0);
      assert.equal((await approvals.get(person, swept)).state, 'expired');
      assert.equal((await stateEvents(swept)).length, 2);
    });
  });

  describe('send_email', () => {
    it('approval records the outbound message in the mailbox and its delivery in one step; rejection records none', async () => {
      const draft = { mailboxId: mailbox, to: ['customer@example.net'], subject: 'Your quote', text: 'Attached.' };
      const sent = await approvals.requestEmail(agent, draft);
      const approved = await approvals.decide(person, sent.request_id, 'approved', null);
      assert.ok(approved.sent_message_id);
      // No relay is configured here: the delivery says so instead of queueing.
      assert.equal(approved.delivery?.status, 'not_configured');
      const message = await tier.get(MessageService).get(agent, approved.sent_message_id);
      assert.equal(message.direction, 'outbound');
      assert.equal(message.subject, 'Your quote');

      const dropped = await approvals.requestEmail(agent, draft);
      const rejected = await approvals.decide(person, dropped.request_id, 'rejected', null);
      assert.equal(rejected.sent_message_id, undefined);
      const [{ count }] = await tier.db.query<{ count: string }>(
        `SELECT count(*) FROM messages WHERE mailbox_id = $1 AND direction = 'outbound'`,
        [mailbox],
      );
      assert.equal(count, '1');
    });

    it('the draft is sanitized before it is stored, and a reply must be to a message of the same mailbox', async () => {
      const created = await approvals.requestEmail(agent, {
        mailboxId: mailbox,
        to: ['customer@example.net'],
        subject: 'Hi',
        text: 'Hi',
        html: '<p>Hi</p><script>alert(1)</script>',
      });
      assert.equal(created.sanitized?.scripts, 1);
      const stored = await approvals.get(person, created.request_id);
      assert.doesNotMatch(stored.email!.html!, /script/);

      const [elsewhere] = await tier.get(MessageService).store([otherMailbox], inbound({ subject: 'elsewhere' }));
      await refused(
        approvals.requestEmail(agent, {
          mailboxId: mailbox,
          to: ['customer@example.net'],
          subject: 'Re: elsewhere',
          text: 'x',
          inReplyToMessageId: elsewhere.messageId,
        }),
        'not_found',
        'message_not_found',
      );
    });
  });
});
