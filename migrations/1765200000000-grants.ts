import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Grants: which mailboxes an OAuth principal reaches. A principal is the subject, the
 * client or a group of a JWT; the name after the kind is whatever the identity provider says.
 */
export class Grants1765200000000 implements MigrationInterface {
  name = 'Grants1765200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE grants (
        id         text PRIMARY KEY,
        principal  text NOT NULL CHECK (principal ~ '^(sub|client|group):.'),
        mailboxes  text[] NOT NULL CHECK (cardinality(mailboxes) > 0),
        created_at timestamptz NOT NULL DEFAULT now(),
        created_by text NOT NULL
      )`);
    // Every authenticated JWT looks its mailboxes up by its principals.
    await q.query(`CREATE INDEX grants_principal ON grants (principal)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE grants`);
  }
}
