import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The approver console: sessions kept in PostgreSQL so that any replica serves any click
 * and signing out ends a session everywhere; the approvers of each mailbox; and the single-use
 * links of approval by email. Session secrets and link tokens are stored only as SHA-256 hashes.
 */
export class Console1765400000000 implements MigrationInterface {
  name = 'Console1765400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE console_sessions (
        secret_hash   character(64) PRIMARY KEY,
        credential_id text NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        expires_at    timestamptz NOT NULL
      )`);
    await q.query(`CREATE INDEX console_sessions_expiry ON console_sessions (expires_at)`);
    await q.query(`
      CREATE TABLE mailbox_approvers (
        mailbox_id text NOT NULL REFERENCES mailboxes (id),
        email      text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (mailbox_id, email)
      )`);
    await q.query(`
      CREATE TABLE approval_links (
        token_hash character(64) PRIMARY KEY,
        request_id text NOT NULL REFERENCES approval_requests (id),
        email      text NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at    timestamptz
      )`);
    await q.query(`CREATE INDEX approval_links_request ON approval_links (request_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE approval_links`);
    await q.query(`DROP TABLE mailbox_approvers`);
    await q.query(`DROP TABLE console_sessions`);
  }
}
