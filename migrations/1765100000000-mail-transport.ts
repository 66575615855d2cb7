import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Mail transport: the sender authentication of inbound messages, the References chain
 * that outbound replies continue, and the outbox of approved mail with its delivery state.
 */
export class MailTransport1765100000000 implements MigrationInterface {
  name = 'MailTransport1765100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE messages
        ADD COLUMN authentication jsonb NOT NULL
          DEFAULT '{"spf": "none", "dkim": "none", "dmarc": "none", "arc": "none"}',
        ADD COLUMN from_verified boolean NOT NULL DEFAULT false,
        ADD COLUMN references_header text[] NOT NULL DEFAULT '{}'`);
    // The default only fills existing rows: every new message states its authentication.
    await q.query(`ALTER TABLE messages ALTER COLUMN authentication DROP DEFAULT`);
    await q.query(`
      CREATE TABLE outbound_deliveries (
        message_id       text PRIMARY KEY REFERENCES messages (id),
        mailbox_id       text NOT NULL REFERENCES mailboxes (id),
        request_id       text REFERENCES approval_requests (id),
        status           text NOT NULL CHECK (status IN
                           ('queued', 'sending', 'sent', 'retrying', 'failed', 'bounced', 'not_configured')),
        attempts         integer NOT NULL DEFAULT 0,
        queued_at        timestamptz NOT NULL,
        next_attempt_at  timestamptz,
        last_attempt_at  timestamptz,
        response         text,
        error            text,
        claimed_by       text,
        lease_expires_at timestamptz,
        updated_at       timestamptz NOT NULL
      )`);
    // The worker's claim: due work in due order, and lapsed claims of replicas that died.
    await q.query(`
      CREATE INDEX outbound_deliveries_due ON outbound_deliveries (next_attempt_at)
        WHERE status IN ('queued', 'retrying')`);
    await q.query(`
      CREATE INDEX outbound_deliveries_leases ON outbound_deliveries (lease_expires_at)
        WHERE status = 'sending'`);
    await q.query(`CREATE INDEX outbound_deliveries_mailbox ON outbound_deliveries (mailbox_id, updated_at)`);
    await q.query(`CREATE INDEX outbound_deliveries_request ON outbound_deliveries (request_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE outbound_deliveries`);
    await q.query(
      `ALTER TABLE messages DROP COLUMN authentication, DROP COLUMN from_verified, DROP COLUMN references_header`,
    );
  }
}
