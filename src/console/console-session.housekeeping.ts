import { Injectable } from '@nestjs/common';
import { Housekeeping } from '../lifecycle/housekeeping';
import { AppConfig } from '../config/app-config';
import { DrainState } from '../lifecycle/drain-state';
import { ConsoleSessionRepository } from './console-session.repository';
import { SESSION_LIFETIME_MS } from './console-session.service';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/**
 * Deletes console sessions that expired more than SESSION_LIFETIME_MS ago (every
 * ALCARTA_HOUSEKEEPING_SECONDS). Until then an expired session stays, so that a person coming
 * back is told their session expired rather than asked to sign in without a word.
 */
@Job('work')
@Injectable()
export class ConsoleSessionHousekeeping implements BackgroundJob {
  private readonly housekeeping: Housekeeping;

  constructor(config: AppConfig, drain: DrainState, sessions: ConsoleSessionRepository) {
    this.housekeeping = new Housekeeping(ConsoleSessionHousekeeping.name, config, drain, async () => ({
      console_sessions: await sessions.deleteExpiredBefore(new Date(Date.now() - SESSION_LIFETIME_MS)),
    }));
  }

  start(): void {
    this.housekeeping.start();
  }

  stop(): Promise<void> {
    return this.housekeeping.stop();
  }
}
