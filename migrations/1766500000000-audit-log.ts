import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit trail (docs/audit.md): `audit_log` the chained entries, `audit_head` the one row every
 * append locks (the last entry's seq and hash), `audit_checkpoints` what pruning leaves behind.
 */
export class AuditLog1766500000000 implements MigrationInterface {
  name = 'AuditLog1766500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE audit_log (
        seq            bigint PRIMARY KEY,
        at             timestamptz NOT NULL,
        action         text NOT NULL,
        actor          jsonb NOT NULL,
        client_address text,
        subject        jsonb NOT NULL,
        prev_sha256    text NOT NULL,
        sha256         text NOT NULL
      )`);
    await q.query(`CREATE INDEX audit_log_at ON audit_log (at)`);
    await q.query(`
      CREATE TABLE audit_head (
        id     smallint PRIMARY KEY,
        seq    bigint NOT NULL,
        sha256 text NOT NULL
      )`);
    await q.query(`INSERT INTO audit_head (id, seq, sha256) VALUES (1, 0, repeat('0', 64))`);
    await q.query(`
      CREATE TABLE audit_checkpoints (
        seq       bigint PRIMARY KEY,
        sha256    text NOT NULL,
        pruned_at timestamptz NOT NULL,
        key_id    text NOT NULL,
        signature text NOT NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE audit_checkpoints, audit_head, audit_log`);
  }
}
