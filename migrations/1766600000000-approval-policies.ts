import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Approval policies (docs/policies.md): one optional row per mailbox says who may decide, how many
 * must approve, the default expiry, when to escalate and to whom, and which recipients are blocked
 * or routine. A request keeps the quorum it was made under, its approvals so far, and when it is
 * (and was) escalated. The `credentials` view gains a principal's groups, so `group:` approvers are
 * recognised wherever a credential is read back (console sessions).
 */
export class ApprovalPolicies1766600000000 implements MigrationInterface {
  name = 'ApprovalPolicies1766600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE mailbox_policies (
        mailbox_id text PRIMARY KEY REFERENCES mailboxes (id) ON DELETE CASCADE,
        approvers text[],
        quorum integer NOT NULL DEFAULT 1 CHECK (quorum BETWEEN 1 AND 20),
        expires_after_seconds integer,
        escalate_after_seconds integer,
        escalate_to text[] NOT NULL DEFAULT '{}',
        recipients_allow text[] NOT NULL DEFAULT '{}',
        recipients_block text[] NOT NULL DEFAULT '{}',
        auto_approve boolean NOT NULL DEFAULT false,
        updated_at timestamptz NOT NULL DEFAULT now(),
        updated_by text NOT NULL
      )`);
    await q.query(`ALTER TABLE approval_requests ADD COLUMN quorum integer NOT NULL DEFAULT 1`);
    await q.query(`ALTER TABLE approval_requests ADD COLUMN approvals jsonb NOT NULL DEFAULT '[]'`);
    await q.query(`ALTER TABLE approval_requests ADD COLUMN escalate_at timestamptz`);
    await q.query(`ALTER TABLE approval_requests ADD COLUMN escalated_at timestamptz`);
    await q.query(`
      CREATE INDEX approval_requests_escalation_due ON approval_requests (escalate_at)
        WHERE state = 'pending' AND escalated_at IS NULL AND escalate_at IS NOT NULL`);
    // Approval mail carries escalations and answers to replies too; a link knows the mail it came in.
    await q.query(`ALTER TABLE approval_mails ADD COLUMN kind text NOT NULL DEFAULT 'approval'`);
    await q.query(`ALTER TABLE approval_mails ADD COLUMN note text`);
    await q.query(`ALTER TABLE approval_mails ADD COLUMN in_reply_to text`);
    await q.query(
      `ALTER TABLE approval_mails ADD CONSTRAINT approval_mails_kind_check CHECK (kind IN ('approval', 'escalation', 'reply_answer'))`,
    );
    await q.query(`ALTER TABLE approval_links ADD COLUMN message_id text`);
    await q.query(
      `CREATE UNIQUE INDEX approval_links_message_id ON approval_links (message_id) WHERE message_id IS NOT NULL`,
    );
    await q.query(`
      CREATE OR REPLACE VIEW credentials AS
        SELECT id, scopes, mailboxes, expires_at, revoked_at,
               NULL::text AS issuer, NULL::text AS subject, NULL::text AS client_id, NULL::text AS email,
               name, NULL::text[] AS groups
          FROM tokens
        UNION ALL
        SELECT id, scopes, principal_mailboxes(subject, client_id, groups), NULL::timestamptz, NULL::timestamptz,
               issuer, subject, client_id, email,
               COALESCE(NULLIF(email, ''), NULLIF(client_id, ''), subject), groups
          FROM principals`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP VIEW credentials`);
    await q.query(`
      CREATE VIEW credentials AS
        SELECT id, scopes, mailboxes, expires_at, revoked_at,
               NULL::text AS issuer, NULL::text AS subject, NULL::text AS client_id, NULL::text AS email,
               name
          FROM tokens
        UNION ALL
        SELECT id, scopes, principal_mailboxes(subject, client_id, groups), NULL::timestamptz, NULL::timestamptz,
               issuer, subject, client_id, email,
               COALESCE(NULLIF(email, ''), NULLIF(client_id, ''), subject)
          FROM principals`);
    await q.query(`DROP INDEX approval_links_message_id`);
    await q.query(`ALTER TABLE approval_links DROP COLUMN message_id`);
    for (const column of ['in_reply_to', 'note', 'kind'])
      await q.query(`ALTER TABLE approval_mails DROP COLUMN ${column}`);
    await q.query(`DROP INDEX approval_requests_escalation_due`);
    for (const column of ['escalated_at', 'escalate_at', 'approvals', 'quorum'])
      await q.query(`ALTER TABLE approval_requests DROP COLUMN ${column}`);
    await q.query(`DROP TABLE mailbox_policies`);
  }
}
