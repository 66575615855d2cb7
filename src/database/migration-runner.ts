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
}
