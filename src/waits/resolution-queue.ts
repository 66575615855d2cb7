import { Logger } from '@nestjs/common';
import { Metrics } from '../metrics/metrics';
import { PersistedWaitRepository, WaitResolution } from './persisted-wait.repository';
import { WaitResult } from './wait-spec';

/** Most waits written by one statement (and announced by one transaction's bells). */
const MAX_BATCH = 1000;

/**
 * Writes the outcomes of the persisted waits this replica owns, in batches: one transaction per
 * batch (one UPDATE, the resolution hooks once, the doorbells several ids each), never one per
 * wait. The coalescing window is one turn of the event loop: everything settled by the same
 * doorbell (one ingest waking thousands of websocket waits settles them in one pass) is flushed
 * together by a setImmediate; while a batch is being written, newer outcomes queue up and go in the
 * next. A batch that fails is logged and dropped: its waits are still pending and owned, so the
 * safety re-check finds them unwatched and watches (and resolves) them again.
 */
export class ResolutionQueue {
  private readonly logger = new Logger(ResolutionQueue.name);
  private readonly queued = new Map<string, WaitResult>();
  private flushing: Promise<void> | undefined;
  /** Waits queued or being written: the safety re-check must not watch them again meanwhile. */
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly persisted: PersistedWaitRepository,
    private readonly metrics: Metrics,
  ) {}

  has(waitId: string): boolean {
    return this.inFlight.has(waitId);
  }

  add(waitId: string, result: WaitResult): void {
    if (this.inFlight.has(waitId)) return;
    this.inFlight.add(waitId);
    this.queued.set(waitId, result);
    this.flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.flush());
  }

  /** Resolves once everything queued so far is written (or failed); for draining. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    while (this.queued.size > 0) {
      const batch: WaitResolution[] = [];
      for (const [waitId, result] of this.queued) {
        batch.push({ waitId, result });
        this.queued.delete(waitId);
        if (batch.length === MAX_BATCH) break;
      }
      try {
        const resolved = await this.persisted.resolveMany(batch);
        this.metrics.waitResolutionBatches.inc();
        this.metrics.waitResolutions.inc(resolved.length);
      } catch (err) {
        this.logger.error(err instanceof Error ? err : String(err));
      } finally {
        for (const { waitId } of batch) this.inFlight.delete(waitId);
      }
    }
    this.flushing = undefined;
  }
}
