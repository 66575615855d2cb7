import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The console's request pages: who asked is shown by name, so the `credentials` view
 * gains a `name` (a token's name; a principal's email, else its client id, else its subject); and
 * the history lists decided requests by decision time, newest first, from an index on it.
 */
export class RequestPages1765600000000 implements MigrationInterface {
  name = 'RequestPages1765600000000';

  async up(q: QueryRunner): Promise<void> {
    // OR REPLACE may add a column at the end; the columns before it stay as they were.
    await q.query(`
      CREATE OR REPLACE VIEW credentials AS
        SELECT id, scopes, mailboxes, expires_at, revoked_at,
               NULL::text AS issuer, NULL::text AS subject, NULL::text AS client_id, NULL::text AS email,
               name
          FROM tokens
        UNION ALL
        SELECT id, scopes, principal_mailboxes(subject, client_id, groups), NULL::timestamptz, NULL::timestamptz,
               issuer, subject, client_id, email,
               COALESCE(NULLIF(email, ''), NULLIF(client_id, ''), subject)
          FROM principals`);
    await q.query(
      `CREATE INDEX approval_requests_decided ON approval_requests (decided_at, id) WHERE decided_at IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX approval_requests_decided`);
    await q.query(`DROP VIEW credentials`);
    await q.query(`
      CREATE VIEW credentials AS
        SELECT id, scopes, mailboxes, expires_at, revoked_at,
               NULL::text AS issuer, NULL::text AS subject, NULL::text AS client_id, NULL::text AS email
          FROM tokens
        UNION ALL
        SELECT id, scopes, principal_mailboxes(subject, client_id, groups), NULL::timestamptz, NULL::timestamptz,
               issuer, subject, client_id, email
          FROM principals`);
  }
}
