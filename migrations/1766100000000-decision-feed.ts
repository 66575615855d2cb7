import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The feed of approval decisions of the Events extension (`approval.decided`) reads the event
 * log in commit-safe order: each event row records the id of the transaction that wrote it (`xact`,
 * PostgreSQL's 64-bit xid8 as a bigint), and a reader takes only rows of transactions older than the
 * oldest one still running (see EventRepository.decisionsAfter). Existing rows keep NULL: the feed
 * starts at "now" for every client. Adding a nullable column and then its default rewrites nothing;
 * the partial index is built CONCURRENTLY (outside a transaction), so writers are not blocked.
 */
export class DecisionFeed1766100000000 implements MigrationInterface {
  name = 'DecisionFeed1766100000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    // The writing transaction's id as a bigint: TypeORM knows no xid8 column type.
    await q.query(
      `CREATE OR REPLACE FUNCTION alcarta_current_xact() RETURNS bigint LANGUAGE sql VOLATILE
         AS $$ SELECT pg_current_xact_id()::text::bigint $$`,
    );
    await q.query(`ALTER TABLE events ADD COLUMN IF NOT EXISTS xact bigint`);
    await q.query(`ALTER TABLE events ALTER COLUMN xact SET DEFAULT alcarta_current_xact()`);
    // A concurrent build that failed half-way leaves an invalid index behind: start again.
    const leftover = (await q.query(
      `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('events_decisions')`,
    )) as Array<{ valid: boolean }>;
    if (leftover.length > 0 && !leftover[0].valid) await q.query(`DROP INDEX CONCURRENTLY events_decisions`);
    await q.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS events_decisions ON events (xact, id)
        WHERE type = 'request_state_changed' AND xact IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS events_decisions`);
    await q.query(`ALTER TABLE events DROP COLUMN IF EXISTS xact`);
    await q.query(`DROP FUNCTION IF EXISTS alcarta_current_xact()`);
  }
}
