import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The feed of new approval requests of the Events extension (`approval.requested`) reads the
 * `request_created` events of the event log in commit-safe order, as the decision feed reads
 * `request_state_changed` (see 1766100000000-decision-feed): a partial index of its own on
 * (xact, id), built CONCURRENTLY (outside a transaction) so writers are not blocked.
 */
export class RequestCreatedFeed1766910000000 implements MigrationInterface {
  name = 'RequestCreatedFeed1766910000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    // A concurrent build that failed half-way leaves an invalid index behind: start again.
    const leftover = (await q.query(
      `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('events_requests_created')`,
    )) as Array<{ valid: boolean }>;
    if (leftover.length > 0 && !leftover[0].valid) await q.query(`DROP INDEX CONCURRENTLY events_requests_created`);
    await q.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS events_requests_created ON events (xact, id)
        WHERE type = 'request_created' AND xact IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS events_requests_created`);
  }
}
