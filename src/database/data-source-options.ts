import { join } from 'node:path';
import { TypeOrmModuleOptions } from '@nestjs/typeorm';
import { boundedPg } from './bounded-pool';

/**
 * Every table's entity class. The list is owned above the feature modules (src/schema/entities.ts)
 * and handed down, so the database module depends on none of the modules whose tables it serves.
 */
export type TableEntities = readonly (new () => object)[];

/**
 * The migrations: compiled into dist/migrations/ beside the build, or the TypeScript files of
 * migrations/ when the server runs from source (the tests' default, see docs/testing.md).
 */
const MIGRATIONS = __filename.endsWith('.ts')
  ? join(__dirname, '..', '..', 'migrations', '*.ts')
  : join(__dirname, '..', 'migrations', '*.js');

/**
 * The one description of how Alcarta talks to PostgreSQL, shared by the server, the CLI and the
 * tests. `applicationName` names the pool's sessions in pg_stat_activity. The schema is owned by
 * the migrations in `migrations/`;
 * `synchronize` stays off everywhere.
 */
export function dataSourceOptions(
  url: string,
  poolSize: number,
  entities: TableEntities,
  applicationName = 'alcarta',
): TypeOrmModuleOptions {
  return {
    type: 'postgres',
    url,
    entities: [...entities],
    migrations: [MIGRATIONS],
    migrationsTableName: 'schema_migrations',
    synchronize: false,
    migrationsRun: false,
    logging: false,
    applicationName,
    // Separate bounds on connecting and on queueing for a free connection (see BoundedPool). The
    // pool opens fresh connections by itself once PostgreSQL is back.
    driver: boundedPg,
    extra: { max: poolSize },
    retryAttempts: 0,
  };
}
