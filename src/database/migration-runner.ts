import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** Any constant works; it only has to be the same in every replica. */
const MIGRATION_LOCK_KEY = 0x616c6361;

/**
 * Applies pending migrations. Replicas that start together would otherwise race to create the same
 * tables: a session-level advisory lock makes them take turns, and the ones that come second find
 * nothing left to do.
 */
@Injectable()
export class MigrationRunner {
  private readonly logger = new Logger(MigrationRunner.name);

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async run(): Promise<string[]> {
    const lock = this.dataSource.createQueryRunner();
    await lock.connect();
    try {
      await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      const applied = await this.dataSource.runMigrations({ transaction: 'each' });
      const names = applied.map((m) => m.name);
      if (names.length > 0) this.logger.log({ msg: 'migrations applied', migrations: names });
      return names;
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
      await lock.release();
    }
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
