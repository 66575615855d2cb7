import { join } from 'node:path';
import { TypeOrmModuleOptions } from '@nestjs/typeorm';
import { ENTITIES } from './entities';

/**
 * The one description of how Alcarta talks to PostgreSQL, shared by the server, the CLI and the
 * tests. The schema is owned by the migrations in `migrations/` (compiled next to this build);
 * `synchronize` stays off everywhere.
 */
export function dataSourceOptions(url: string, poolSize: number): TypeOrmModuleOptions {
  return {
    type: 'postgres',
    url,
    entities: ENTITIES,
    migrations: [join(__dirname, '..', 'migrations', '*.js')],
    migrationsTableName: 'schema_migrations',
    synchronize: false,
    migrationsRun: false,
    logging: false,
    applicationName: 'alcarta',
    extra: { max: poolSize, connectionTimeoutMillis: 10_000 },
    retryAttempts: 0,
  };
}
