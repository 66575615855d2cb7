import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * OAuth principals as credentials: the claims that grants match (subject,
 * client, groups) and the scopes of the principal's newest access token, kept so that any replica
 * can act for a principal's stored waits, tickets and tasks without its token. `principal_mailboxes`
 * is the one definition of which mailboxes grants give; `credentials` puts tokens and principals
 * side by side for whoever rebuilds a caller from a binding id.
 */
export class Principals1765300000000 implements MigrationInterface {
  name = 'Principals1765300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE principals (
        id text PRIMARY KEY,
        issuer text NOT NULL,
        subject text NOT NULL,
        client_id text,
        groups text[] NOT NULL DEFAULT '{}',
        scopes text[] NOT NULL DEFAULT '{}',
        email text,
        claims_issued_at timestamptz NOT NULL,
        first_seen_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX principals_subject ON principals (subject)`);
    await q.query(`CREATE INDEX principals_client ON principals (client_id) WHERE client_id IS NOT NULL`);
    await q.query(`CREATE INDEX principals_groups ON principals USING gin (groups)`);
    await q.query(`
      CREATE FUNCTION principal_mailboxes(p_subject text, p_client_id text, p_groups text[]) RETURNS text[]
      LANGUAGE sql STABLE AS $$
        SELECT CASE WHEN '*' = ANY (m.ids) THEN ARRAY['*'] ELSE m.ids END
          FROM (SELECT COALESCE(array_agg(DISTINCT mailbox ORDER BY mailbox), '{}') AS ids
                  FROM grants g CROSS JOIN LATERAL unnest(g.mailboxes) AS mailbox
                 WHERE g.principal = 'sub:' || p_subject
                    OR g.principal = 'client:' || p_client_id
                    OR g.principal = ANY (SELECT 'group:' || name FROM unnest(p_groups) AS name)) m
      $$`);
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

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP VIEW credentials`);
    await q.query(`DROP FUNCTION principal_mailboxes(text, text, text[])`);
    await q.query(`DROP TABLE principals`);
  }
}
