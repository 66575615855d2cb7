import { Logger } from '@nestjs/common';

/**
 * Runs `work` every `intervalMs`, never two runs at once, logging failures instead of crashing:
 * the next run tries again. For housekeeping that every replica may run at the same time.
 */
export class PeriodicJob {
  private readonly logger: Logger;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    name: string,
    private readonly intervalMs: number,
    private readonly work: () => Promise<void>,
  ) {
    this.logger = new Logger(name);
  }

  /** Runs `work` every interval from now on, the first time after `firstRunMs` (by default one interval). */
  start(firstRunMs = this.intervalMs): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = setInterval(() => void this.runOnce(), this.intervalMs).unref();
      void this.runOnce();
    }, firstRunMs).unref();
  }

  /** Stops the schedule and waits for a run in progress. */
  async stop(): Promise<void> {
    // Node's clearTimeout ends an interval too.
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async runOnce(): Promise<void> {
    if (this.running) return;
    this.running = this.work()
      .catch((err) => this.logger.error(err instanceof Error ? err : String(err)))
      .finally(() => (this.running = undefined));
    await this.running;
  }
}
