import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { PeriodicJob } from '../lifecycle/periodic-job';
import { TaskRepository } from './task.repository';

const SWEEP_INTERVAL_MS = 30_000;

/** Deletes tasks past their ttl (and stops their waits). Server only; safe on every replica. */
@Injectable()
export class TaskSweeper implements OnModuleDestroy {
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

  onModuleDestroy(): Promise<void> {
    return this.job.stop();
  }
}
