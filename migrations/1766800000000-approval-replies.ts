import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Deciding by reply (docs/approvers.md): a reply to an approval mail is recorded in the transaction
 * that stores it as a message, and the approval mail worker decides it later, so a crash between
 * the two loses nothing. The row keeps what deciding needs (the sender, whether it was verified, the
 * parsed first word and reason), not the message itself. It goes when its link goes (housekeeping
 * deletes spent links once their request no longer waits).
 */
export class ApprovalReplies1766800000000 implements MigrationInterface {
  name = 'ApprovalReplies1766800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE approval_replies (
        message_id text PRIMARY KEY,
        token_hash character(64) NOT NULL REFERENCES approval_links (token_hash) ON DELETE CASCADE,
        sender text NOT NULL,
        from_verified boolean NOT NULL,
        decision text CHECK (decision IN ('approved', 'rejected')),
        reason text,
        header_message_id text,
        status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processing', 'done')),
        outcome text,
        answered boolean NOT NULL DEFAULT false,
        attempts integer NOT NULL DEFAULT 0,
        claimed_by text,
        lease_expires_at timestamptz,
        received_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX approval_replies_link ON approval_replies (token_hash)`);
    await q.query(`
      CREATE INDEX approval_replies_due ON approval_replies ((coalesce(lease_expires_at, received_at)))
        WHERE status <> 'done'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE approval_replies`);
  }
}
