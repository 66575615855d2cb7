import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Housekeeping } from '../common/housekeeping';
import { AppConfig } from '../config/app-config';
import { DrainState } from '../lifecycle/drain-state';
import { EventRepository } from './event.repository';

/** One deletion window: a busy hour's events are a few hundred batches at most. */
export const RETENTION_WINDOW_MS = 3600 * 1000;

/**
 * The windows [from, to) that cover the events from `oldest` up to `cutoff`, oldest first, each at
 * most `windowMs` long; none when nothing is older than the cutoff.
 */
export function retentionWindows(
  oldest: Date,
  cutoff: Date,
  windowMs = RETENTION_WINDOW_MS,
): Array<{ from: Date; to: Date }> {
  const windows: Array<{ from: Date; to: Date }> = [];
  for (let from = oldest.getTime(); from < cutoff.getTime(); from += windowMs) {
    windows.push({ from: new Date(from), to: new Date(Math.min(from + windowMs, cutoff.getTime())) });
  }
  return windows;
}

/**
 * Deletes events older than ALCARTA_EVENT_RETENTION_DAYS (every ALCARTA_HOUSEKEEPING_SECONDS).
 * Nothing a client holds depends on them: message cursors are per-mailbox message positions, and
 * request waits fall back to the request's own row when its latest event is gone (see WaitRepository).
 * The first run after an upgrade may face a long backlog: it goes an hour of events at a time,
 * oldest first, and stops between windows when the replica drains (the next run carries on).
 */
@Injectable()
export class EventRetentionHousekeeping implements OnModuleDestroy {
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

  onModuleDestroy(): Promise<void> {
    return this.housekeeping.stop();
  }

  private async deleteExpired(): Promise<number> {
    const oldest = await this.events.oldestCreatedAt();
    if (!oldest) return 0;
    let deleted = 0;
    for (const { from, to } of retentionWindows(oldest, new Date(Date.now() - this.config.eventRetentionMs))) {
      if (this.drain.isDraining) break;
      deleted += await this.events.deleteCreatedBetween(from, to);
    }
    return deleted;
  }
}
