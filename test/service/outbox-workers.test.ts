import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApprovalService } from '#app/approvals/approval.service.js';
import { MessageEntity } from '#app/mail/message.entity.js';
import { AttemptOutcome, SmtpRelay } from '#app/outbox/smtp-relay.js';
import { ServiceTier, ServiceTierOptions, startServiceTier } from '../support/service-tier';
import { waitFor } from '../support/wait-for';

/** A relay that records what it is given and accepts it; `name` says which replica sent. */
function recordingRelay(name: string, sends: Array<{ replica: string; messageId: string }>) {
  return {
    configured: true,
    attemptTimeoutMs: 10_000,
    send: (message: MessageEntity): Promise<AttemptOutcome> => {
      sends.push({ replica: name, messageId: message.id });
      return Promise.resolve({ kind: 'sent', response: `250 accepted by ${name}` });
    },
    close: () => undefined,
  };
}

/**
 * Two replicas' outbox workers, each with its own relay, on one database: approved mail is sent as
 * soon as the approval commits (the outbox doorbell wakes the workers), and each message is handed
 * to a relay exactly once, whichever replica claims it.
 */
describe('outbox workers of two replicas', () => {
  const sends: Array<{ replica: string; messageId: string }> = [];
  let first: ServiceTier;
  let second: ServiceTier;

  before(async () => {
    const relayOf = (name: string): ServiceTierOptions => ({
      env: { ALCARTA_SMTP_RELAY_URL: 'smtp://127.0.0.1:9' },
      override: (builder) => builder.overrideProvider(SmtpRelay).useValue(recordingRelay(name, sends)),
    });
    first = await startServiceTier(relayOf('first'));
    second = await startServiceTier({ ...relayOf('second'), db: first.db });
    for (const tier of [first, second]) {
      await tier.startDoorbells();
      tier.startOutboxWorker();
    }
  });
  after(async () => {
    await first?.close({ keepDatabase: true });
    await second?.close();
  });

  it('every approved email is sent once, by one replica, and recorded as sent', async () => {
    const mailbox = await first.mailbox();
    const agent = await first.caller(['mail:send', 'approvals:read'], [mailbox]);
    const person = await first.caller(['approvals:decide'], [mailbox]);
    const approvals = first.get(ApprovalService);

    const approve = async (i: number) => {
      const { request_id } = await approvals.requestEmail(agent, {
        mailboxId: mailbox,
        to: [`customer${i}@example.net`],
        subject: `Order ${i}`,
        text: `Order ${i} is confirmed.`,
      });
      return (await approvals.decide(person, request_id, 'approved', null)).sent_message_id!;
    };
    const approved = await Promise.all(Array.from({ length: 16 }, (_, i) => approve(i)));

    const rows = await waitFor('every delivery to be sent', async () => {
      const sent = await first.db.query<{ message_id: string; response: string; attempts: number }>(
        `SELECT message_id, response, attempts FROM outbound_deliveries WHERE status = 'sent'`,
      );
      return sent.length === approved.length ? sent : undefined;
    });
    assert.deepEqual(
      sends.map((s) => s.messageId).sort(),
      [...approved].sort(),
      'each message reached a relay exactly once',
    );
    for (const row of rows) {
      const sender = sends.find((s) => s.messageId === row.message_id)!;
      assert.equal(row.response, `250 accepted by ${sender.replica}`, 'recorded by the replica that sent it');
      assert.equal(row.attempts, 1);
    }
  });
});
