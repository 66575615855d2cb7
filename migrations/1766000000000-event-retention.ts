import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Event retention: housekeeping deletes events older than ALCARTA_EVENT_RETENTION_DAYS,
 * oldest first, by `created_at`; without this index every run would scan the whole table. Built
 * CONCURRENTLY (so outside a transaction): on a large existing log, replicas still writing events
 * during a rolling upgrade are not blocked while it builds.
 */
export class EventRetention1766000000000 implements MigrationInterface {
  name = 'EventRetention1766000000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    // A concurrent build that failed half-way leaves an invalid index behind: start again.
    const leftover = (await q.query(
      `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('events_created_at')`,
    )) as Array<{ valid: boolean }>;
    if (leftover.length > 0 && !leftover[0].valid) await q.query(`DROP INDEX CONCURRENTLY events_created_at`);
    await q.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS events_created_at ON events (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS events_created_at`);
  }
}
