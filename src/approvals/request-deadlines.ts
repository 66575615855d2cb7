import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { PeriodicJob } from '../lifecycle/periodic-job';
import { AppConfig } from '../config/app-config';
import { Metrics } from '../metrics/metrics';
import { ApprovalService } from './approval.service';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/**
 * The deadlines of pending requests, every ALCARTA_EXPIRY_SWEEP_SECONDS: overdue ones expire (so
 * their waiters learn of it without anyone reading the request), then those past their policy's
 * escalation time escalate. Started by the server (not by the CLI); safe to run on every replica at
 * once (both lock with SKIP LOCKED, and each request expires or escalates once).
 */
@Job('work')
@Injectable()
export class RequestDeadlines implements BackgroundJob {
  private readonly logger = new Logger(RequestDeadlines.name);
  private readonly job: PeriodicJob;

  constructor(approvals: ApprovalService, config: AppConfig, metrics: Metrics) {
    // Operators see that the sweep runs; tests wait for a replica to have swept again.
    const sweeps = new Counter({
      name: 'alcarta_request_deadline_sweeps_total',
      help: 'Completed sweeps of request deadlines (expiry, then escalation) by this process.',
      registers: [metrics.registry],
    });
    const escalations = new Counter({
      name: 'alcarta_requests_escalated_total',
      help: 'Pending requests this process escalated (their policy escalation time passed with no decision).',
      registers: [metrics.registry],
    });
    this.job = new PeriodicJob(RequestDeadlines.name, config.expirySweepMs, async () => {
      const expired = await approvals.expireOverdue();
      if (expired > 0) this.logger.log({ msg: 'expired overdue requests', count: expired });
      const escalated = await approvals.escalateDue();
      if (escalated > 0) {
        escalations.inc(escalated);
        this.logger.log({ msg: 'escalated requests', count: escalated });
      }
      sweeps.inc();
    });
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }
}
