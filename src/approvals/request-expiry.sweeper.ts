import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { ApprovalService } from './approval.service';

/**
 * Expires overdue pending requests every ALCARTA_EXPIRY_SWEEP_SECONDS, so their waiters learn of
 * it without anyone reading the request. Started by the server (not by the CLI); safe to run on
 * every replica at once.
 */
@Injectable()
export class RequestExpirySweeper implements OnModuleDestroy {
  private readonly logger = new Logger(RequestExpirySweeper.name);
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly approvals: ApprovalService,
    private readonly config: AppConfig,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.sweep(), this.config.expirySweepMs);
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async sweep(): Promise<void> {
    if (this.running) return;
    this.running = (async () => {
      try {
        const expired = await this.approvals.expireOverdue();
        if (expired > 0) this.logger.log({ msg: 'expired overdue requests', count: expired });
      } catch (err) {
        this.logger.error(err instanceof Error ? err : String(err));
      } finally {
        this.running = undefined;
      }
    })();
    await this.running;
  }
}
