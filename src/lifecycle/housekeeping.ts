import { Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { DrainState } from './drain-state';
import { PeriodicJob } from './periodic-job';

/** The first housekeeping run comes this long after start, not amid the start-up of a fleet. */
const FIRST_RUN_MS = 60_000;

/**
 * A module's housekeeping: `purge` deletes the module's old rows and answers how many went, by
 * kind. It runs every ALCARTA_HOUSEKEEPING_SECONDS on every replica (so `purge` must be safe to run
 * concurrently: deleteInBatches), the first time a minute after start, and stops on drain.
 */
export class Housekeeping {
  private readonly logger: Logger;
  private readonly job: PeriodicJob;

  constructor(
    name: string,
    private readonly config: AppConfig,
    private readonly drain: DrainState,
    purge: () => Promise<Record<string, number>>,
  ) {
    this.logger = new Logger(name);
    this.job = new PeriodicJob(name, config.housekeepingMs, async () => {
      const deleted = await purge();
      if (Object.values(deleted).some((count) => count > 0)) this.logger.log({ msg: 'deleted old rows', ...deleted });
    });
  }

  /** Started by the server (not by the CLI). */
  start(): void {
    this.job.start(Math.min(FIRST_RUN_MS, this.config.housekeepingMs));
    this.drain.onDrain(() => this.job.stop());
  }

  stop(): Promise<void> {
    return this.job.stop();
  }
}
