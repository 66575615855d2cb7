import { Logger } from '@nestjs/common';
import { PersistedWaitRepository, WaitResolution } from './persisted-wait.repository';
import { WaitResult } from './wait-spec';
import { WaitMetrics } from './waits.metrics';

/** Most waits written by one statement (and announced by one transaction's bells). */
const MAX_BATCH = 1000;
/**
 * Batches written at the same time (at most: a third of the database pool, so that requests still
 * find connections), each in its own transaction on its own pooled connection:
 * one ingest that settles 10,000 waits is written in a few rounds of round trips, not ten, and
 * the database works on one batch while this process serialises the next. The batches hold
 * different waits, so they never wait for each other's row locks.
 */
const MAX_WRITERS = 3;

/**
 * Writes the outcomes of the persisted waits this replica owns, in batches: one transaction per
 * batch (one UPDATE, the resolution hooks once, the doorbells several ids each), never one per
 * wait. The coalescing window is one turn of the event loop: everything settled by the same
 * doorbell (one ingest waking thousands of websocket waits settles them in one pass) is flushed
 * together by a setImmediate; while batches are being written, newer outcomes queue up and go in
 * the next. A batch that fails is logged and dropped: its waits are still pending and owned, so
 * the safety re-check finds them unwatched and watches (and resolves) them again.
 *
 * `written` hears each batch once it is done, with the ids it resolved (none when it failed), so that
 * this process answers whoever waits for them here (a socket, a `wait_id` poll, tasks/result)
 * without reading them back; the resolution doorbells wake the other replicas.
 */
export class ResolutionQueue {
  private readonly logger = new Logger(ResolutionQueue.name);
  private readonly queued = new Map<string, WaitResult>();
  /** The coalescing window (one setImmediate) before writers start, while one is open. */
  private window: Promise<void> | undefined;
  private readonly writers = new Set<Promise<void>>();
  /** Waits queued or being written: the safety re-check must not watch them again meanwhile. */
  private readonly inFlight = new Set<string>();

  private readonly maxWriters: number;

  constructor(
    private readonly persisted: PersistedWaitRepository,
    /** This process's lease name: only the waits it still owns are written (see resolveMany). */
    private readonly owner: string,
    private readonly metrics: WaitMetrics,
    poolSize: number,
    private readonly written: (batch: readonly WaitResolution[], resolved: ReadonlySet<string>) => void,
  ) {
    this.maxWriters = Math.max(1, Math.min(MAX_WRITERS, Math.floor(poolSize / 3)));
  }

  has(waitId: string): boolean {
    return this.inFlight.has(waitId);
  }

  add(waitId: string, result: WaitResult): void {
    if (this.inFlight.has(waitId)) return;
    this.inFlight.add(waitId);
    this.queued.set(waitId, result);
    this.window ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.window = undefined;
      this.startWriters();
    });
  }

  /** Resolves once everything queued so far is written (or failed); for draining. */
  async idle(): Promise<void> {
    while (this.window || this.writers.size > 0) await Promise.all([this.window, ...this.writers]);
  }

  private startWriters(): void {
    while (this.writers.size < this.maxWriters && this.queued.size > 0) {
      const writer: Promise<void> = this.writeQueued().finally(() => this.writers.delete(writer));
      this.writers.add(writer);
    }
  }

  /** Writes batch after batch while outcomes are queued (other writers take batches of their own). */
  private async writeQueued(): Promise<void> {
    while (this.queued.size > 0) {
      const batch: WaitResolution[] = [];
      for (const [waitId, result] of this.queued) {
        batch.push({ waitId, result });
        this.queued.delete(waitId);
        if (batch.length === MAX_BATCH) break;
      }
      let resolved = new Set<string>();
      try {
        resolved = new Set(await this.persisted.resolveMany(this.owner, batch));
        this.metrics.resolutionBatches.inc();
        this.metrics.resolutions.inc(resolved.size);
      } catch (err) {
        this.logger.error(err instanceof Error ? err : String(err));
      }
      for (const { waitId } of batch) this.inFlight.delete(waitId);
      this.written(batch, resolved);
    }
  }
}
