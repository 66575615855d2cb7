import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { PersistedWaitRepository } from './persisted-wait.repository';

const SWEEP_INTERVAL_MS = 60_000;

/** Deletes persisted waits whose result is older than ALCARTA_WAIT_RETENTION_SECONDS (server only). */
@Injectable()
export class PersistedWaitSweeper implements OnModuleDestroy {
  private readonly logger = new Logger(PersistedWaitSweeper.name);
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly waits: PersistedWaitRepository,
    private readonly config: AppConfig,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  private async sweep(): Promise<void> {
    try {
      const purged = await this.waits.purgeResolvedBefore(new Date(Date.now() - this.config.waitRetentionMs));
      if (purged > 0) this.logger.log({ msg: 'purged resolved waits past retention', count: purged });
    } catch (err) {
      this.logger.error(err instanceof Error ? err : String(err));
    }
  }
}
