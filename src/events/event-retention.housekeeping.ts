import { Injectable } from '@nestjs/common';
import { Housekeeping } from '../lifecycle/housekeeping';
import { AppConfig } from '../config/app-config';
import { DrainState } from '../lifecycle/drain-state';
import { EventRepository } from './event.repository';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/** One deletion window: a busy hour's events are a few hundred batches at most. */
export const RETENTION_WINDOW_MS = 3600 * 1000;

/**
 * The deletion window that starts at the oldest event left (`oldest`): at most `windowMs` long and
 * ending at the cutoff at the latest; undefined when nothing is older than the cutoff.
 */
export function retentionWindow(
  oldest: Date | undefined,
  cutoff: Date,
  windowMs = RETENTION_WINDOW_MS,
): { from: Date; to: Date } | undefined {
  if (!oldest || oldest >= cutoff) return undefined;
  return { from: oldest, to: new Date(Math.min(oldest.getTime() + windowMs, cutoff.getTime())) };
}

/**
 * Deletes events older than ALCARTA_EVENT_RETENTION_DAYS (every ALCARTA_HOUSEKEEPING_SECONDS).
 * Nothing a client holds depends on them: message cursors are per-mailbox message positions, and
 * request waits fall back to the request's own row when its latest event is gone (see WaitRepository).
 * The first run after an upgrade may face a long backlog: it goes an hour of events at a time,
 * oldest first (each window starts at the oldest event left, so gaps in the history cost nothing),
 * and stops between windows when the replica drains (the next run carries on).
 */
@Job('work')
@Injectable()
export class EventRetentionHousekeeping implements BackgroundJob {
  private readonly housekeeping: Housekeeping;

  constructor(
    private readonly config: AppConfig,
    private readonly drain: DrainState,
    private readonly events: EventRepository,
  ) {
    this.housekeeping = new Housekeeping(EventRetentionHousekeeping.name, config, drain, async () => ({
      events: await this.deleteExpired(),
    }));
  }

  start(): void {
    this.housekeeping.start();
  }

  stop(): Promise<void> {
    return this.housekeeping.stop();
  }

  private async deleteExpired(): Promise<number> {
    const cutoff = new Date(Date.now() - this.config.eventRetentionMs);
    let deleted = 0;
    let window = retentionWindow(await this.events.oldestCreatedAt(), cutoff);
    while (window && !this.drain.isDraining) {
      deleted += await this.events.deleteCreatedBetween(window.from, window.to);
      window = retentionWindow(await this.events.oldestCreatedAt(window.to), cutoff);
    }
    return deleted;
  }
}
