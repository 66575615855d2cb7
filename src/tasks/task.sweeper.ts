import { Injectable, Logger } from '@nestjs/common';
import { PeriodicJob } from '../lifecycle/periodic-job';
import { TaskRepository } from './task.repository';
import { BackgroundJob, Job } from '../lifecycle/background-job';

const SWEEP_INTERVAL_MS = 30_000;

/** Deletes tasks past their ttl (and stops their waits). Server only; safe on every replica. */
@Job('work')
@Injectable()
export class TaskSweeper implements BackgroundJob {
  private readonly logger = new Logger(TaskSweeper.name);
  private readonly job: PeriodicJob;

  constructor(tasks: TaskRepository) {
    this.job = new PeriodicJob(TaskSweeper.name, SWEEP_INTERVAL_MS, async () => {
      const purged = await tasks.purgeExpired();
      if (purged > 0) this.logger.log({ msg: 'purged expired tasks', count: purged });
    });
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }
}
