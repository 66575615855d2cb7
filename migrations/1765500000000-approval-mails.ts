import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Approval by email: one delivery job per approver and new request. It is not an
 * outbound message of the mailbox (agents must never read an approver's link), so it has its own
 * small queue; the link token is made when the mail is sent and only its hash is stored
 * (approval_links), so no usable token ever rests in the database.
 */
export class ApprovalMails1765500000000 implements MigrationInterface {
  name = 'ApprovalMails1765500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE approval_mails (
        id               text PRIMARY KEY,
        request_id       text NOT NULL REFERENCES approval_requests (id),
        email            text NOT NULL,
        status           text NOT NULL CONSTRAINT approval_mails_status_check
                           CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'obsolete')),
        attempts         integer NOT NULL DEFAULT 0,
        queued_at        timestamptz NOT NULL,
        next_attempt_at  timestamptz,
        claimed_by       text,
        lease_expires_at timestamptz,
        error            text,
        updated_at       timestamptz NOT NULL
      )`);
    await q.query(`CREATE INDEX approval_mails_request ON approval_mails (request_id)`);
    await q.query(
      `CREATE INDEX approval_mails_due ON approval_mails (coalesce(next_attempt_at, lease_expires_at))
        WHERE status IN ('queued', 'sending')`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE approval_mails`);
  }
}
