import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One owner per pending persisted wait. Each replica holds one lease row in
 * `wait_owners`, renewed by one statement however many waits it owns, with the session of its
 * doorbell listener (pid and start time) so that other replicas see at once when its process is
 * gone; `waits.owner` names the replica that watches a pending wait (NULL: unowned, any replica may
 * claim it). A lapsed lease is deleted by whichever replica notices, which sets the owner of its
 * waits back to NULL in the same transaction. Resolving a wait clears its owner, so both indexes
 * hold pending waits only.
 */
export class WaitLeases1765900000000 implements MigrationInterface {
  name = 'WaitLeases1765900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE wait_owners (
        id               text PRIMARY KEY,
        lease_expires_at timestamptz NOT NULL,
        listener_pid        integer,
        listener_started_at timestamptz
      )`);
    await q.query(`ALTER TABLE waits ADD COLUMN owner text`);
    await q.query(`CREATE INDEX waits_owner ON waits (owner) WHERE owner IS NOT NULL`);
    await q.query(`CREATE INDEX waits_unowned ON waits (created_at) WHERE status = 'pending' AND owner IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX waits_unowned`);
    await q.query(`DROP INDEX waits_owner`);
    await q.query(`ALTER TABLE waits DROP COLUMN owner`);
    await q.query(`DROP TABLE wait_owners`);
  }
}
