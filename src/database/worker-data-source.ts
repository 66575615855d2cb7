import { OnApplicationShutdown } from '@nestjs/common';
import { DataSource, DataSourceOptions } from 'typeorm';

/**
 * A small pool of its own (ALCARTA_DB_WORKER_POOL_SIZE connections) for a background worker's
 * claims and records, beside the main pool. Requests can queue hundreds deep for the main pool
 * under a burst of ingest; a worker waiting in that queue turns the backlog's age into its latency.
 * Opened on first use (the CLI and replicas that never claim open nothing); closed after every
 * job has stopped (application shutdown follows the jobs' module destroy).
 */
export class WorkerDataSource implements OnApplicationShutdown {
  private opening: Promise<DataSource> | undefined;

  constructor(private readonly options: DataSourceOptions) {}

  /** The open data source; a failed open is tried again on the next call. */
  get(): Promise<DataSource> {
    this.opening ??= new DataSource(this.options).initialize().catch((err: Error) => {
      this.opening = undefined;
      throw err;
    });
    return this.opening;
  }

  async onApplicationShutdown(): Promise<void> {
    const opening = this.opening;
    this.opening = undefined;
    const dataSource = await opening?.catch(() => undefined);
    if (dataSource?.isInitialized) await dataSource.destroy();
  }
}
