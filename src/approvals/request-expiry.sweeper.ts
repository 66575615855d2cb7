import { Injectable, Logger } from '@nestjs/common';
import { PeriodicJob } from '../lifecycle/periodic-job';
import { AppConfig } from '../config/app-config';
import { ApprovalService } from './approval.service';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/**
 * Expires overdue pending requests every ALCARTA_EXPIRY_SWEEP_SECONDS, so their waiters learn of
 * it without anyone reading the request. Started by the server (not by the CLI); safe to run on
 * every replica at once.
 */
@Job('work')
@Injectable()
export class RequestExpirySweeper implements BackgroundJob {
  private readonly logger = new Logger(RequestExpirySweeper.name);
  private readonly job: PeriodicJob;

  constructor(approvals: ApprovalService, config: AppConfig) {
    this.job = new PeriodicJob(RequestExpirySweeper.name, config.expirySweepMs, async () => {
      const expired = await approvals.expireOverdue();
      if (expired > 0) this.logger.log({ msg: 'expired overdue requests', count: expired });
    });
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }
}
