import { Injectable, Logger } from '@nestjs/common';
import { PeriodicJob } from '../lifecycle/periodic-job';
import { AppConfig } from '../config/app-config';
import { PersistedWaitRepository } from './persisted-wait.repository';
import { BackgroundJob, Job } from '../lifecycle/background-job';

const SWEEP_INTERVAL_MS = 60_000;

/** Deletes persisted waits whose result is older than ALCARTA_WAIT_RETENTION_SECONDS (server only). */
@Job('work')
@Injectable()
export class PersistedWaitSweeper implements BackgroundJob {
  private readonly logger = new Logger(PersistedWaitSweeper.name);
  private readonly job: PeriodicJob;

  constructor(waits: PersistedWaitRepository, config: AppConfig) {
    this.job = new PeriodicJob(PersistedWaitSweeper.name, SWEEP_INTERVAL_MS, async () => {
      const purged = await waits.purgeResolvedBefore(new Date(Date.now() - config.waitRetentionMs));
      if (purged > 0) this.logger.log({ msg: 'purged resolved waits past retention', count: purged });
    });
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }
}
