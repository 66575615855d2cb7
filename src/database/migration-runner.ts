import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { setTimeout as delay } from 'node:timers/promises';
import { DataSource, QueryRunner } from 'typeorm';

/** Any constant works; it only has to be the same in every replica. */
export const MIGRATION_LOCK_KEY = 0x616c6361;
/** How often a replica whose peer is migrating asks for the lock again. */
const LOCK_POLL_MS = 250;

/**
 * Applies pending migrations. Replicas that start together would otherwise race to create the same
 * tables: a session-level advisory lock makes them take turns, and the ones that come second find
 * nothing left to do. The ones that come second ask again every LOCK_POLL_MS rather than block in
 * `pg_advisory_lock`: a blocked statement holds a snapshot, and `CREATE INDEX CONCURRENTLY` in the
 * first replica's migrations waits for every older snapshot to end. Both would wait for ever, and
 * PostgreSQL's deadlock detector does not see it (the lock is held by an idle session).
 */
@Injectable()
export class MigrationRunner {
  private readonly logger = new Logger(MigrationRunner.name);

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async run(): Promise<string[]> {
    const lock = this.dataSource.createQueryRunner();
    await lock.connect();
    try {
      while (!(await this.tryLock(lock))) await delay(LOCK_POLL_MS);
      const applied = await this.dataSource.runMigrations({ transaction: 'each' });
      const names = applied.map((m) => m.name);
      if (names.length > 0) this.logger.log({ msg: 'migrations applied', migrations: names });
      return names;
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
      await lock.release();
    }
  }

  private async tryLock(lock: QueryRunner): Promise<boolean> {
    const [{ locked }] = (await lock.query('SELECT pg_try_advisory_lock($1) AS locked', [
      MIGRATION_LOCK_KEY,
    ])) as Array<{
      locked: boolean;
    }>;
    return locked;
  }

  /**
   * With ALCARTA_MIGRATIONS=off someone else (the CLI, the Helm migration Job) owns the schema. Read
   * only, so nothing is created: a replica that starts before the schema is ready stops with a
   * message saying what to run, instead of failing later on a missing table.
   */
  async assertUpToDate(): Promise<void> {
    const [{ table }] = await this.dataSource.query<{ table: string | null }[]>(
      `SELECT to_regclass('schema_migrations')::text AS table`,
    );
    const applied = new Set<string>(
      table
        ? (await this.dataSource.query<{ name: string }[]>('SELECT name FROM schema_migrations')).map((r) => r.name)
        : [],
    );
    const pending = this.dataSource.migrations
      .map((m) => m.name ?? m.constructor.name)
      .filter((name) => !applied.has(name));
    if (pending.length > 0) {
      throw new Error(
        `the database schema is not up to date (pending migrations: ${pending.join(', ')}) and ` +
          'ALCARTA_MIGRATIONS=off: apply them with `npm run cli -- migrate` (node dist/cli.js migrate) first',
      );
    }
  }
}
