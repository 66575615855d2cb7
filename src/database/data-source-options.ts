import { join } from 'node:path';
import { TypeOrmModuleOptions } from '@nestjs/typeorm';
import { ENTITIES } from './entities';

/**
 * The one description of how Alcarta talks to PostgreSQL, shared by the server, the CLI and the
 * tests. The schema is owned by the migrations in `migrations/` (compiled next to this build);
 * `synchronize` stays off everywhere.
 */
/** How long to wait for a pooled connection (a new one, or a free one when all are busy). */
export const CONNECT_TIMEOUT_MS = 3000;

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
    // While PostgreSQL is unreachable a request fails within seconds (503) instead of hanging; the
    // pool opens fresh connections by itself once it is back.
    extra: { max: poolSize, connectionTimeoutMillis: CONNECT_TIMEOUT_MS },
    retryAttempts: 0,
  };
}
