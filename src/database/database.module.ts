import { DynamicModule, Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSourceOptions } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { dataSourceOptions, TableEntities } from './data-source-options';
import { MigrationRunner } from './migration-runner';
import { WorkerDataSource } from './worker-data-source';

@Global()
@Module({})
export class DatabaseModule {
  /** `entities`: every table's entity (src/schema/entities.ts), given by the application that opens the database. */
  static forRoot(entities: TableEntities): DynamicModule {
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [AppConfig],
          useFactory: (config: AppConfig) => {
            if (!config.databaseUrl) throw new Error('DATABASE_URL is not set and no embedded database was started');
            return dataSourceOptions(config.databaseUrl, config.dbPoolSize, entities);
          },
        }),
      ],
      providers: [
        MigrationRunner,
        {
          provide: WorkerDataSource,
          inject: [AppConfig],
          useFactory: (config: AppConfig) =>
            new WorkerDataSource(
              dataSourceOptions(
                config.databaseUrl ?? '',
                config.dbWorkerPoolSize,
                entities,
                'alcarta-worker',
              ) as DataSourceOptions,
            ),
        },
      ],
      exports: [MigrationRunner, WorkerDataSource],
    };
  }
}
