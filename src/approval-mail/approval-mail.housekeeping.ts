import { Injectable } from '@nestjs/common';
import { Housekeeping } from '../lifecycle/housekeeping';
import { AppConfig } from '../config/app-config';
import { DrainState } from '../lifecycle/drain-state';
import { ApprovalLinkRepository } from './approval-link.repository';
import { ApprovalMailRepository } from './approval-mail.repository';
import { BackgroundJob, Job } from '../lifecycle/background-job';

const DAY_MS = 24 * 3600 * 1000;
/**
 * A sent, failed or obsolete approval mail is kept this long after its last attempt (for an
 * operator asking what went out, or why not), then deleted.
 */
export const FINISHED_MAIL_RETENTION_MS = 7 * DAY_MS;
/**
 * A link is kept this long after it was used or expired, so that a late click still gets "already
 * used" or "expired" rather than "unknown link"; never while its request is pending.
 */
export const SPENT_LINK_RETENTION_MS = 7 * DAY_MS;

/** Deletes the approval mails and links nobody needs any more (every ALCARTA_HOUSEKEEPING_SECONDS). */
@Job('work')
@Injectable()
export class ApprovalMailHousekeeping implements BackgroundJob {
  private readonly housekeeping: Housekeeping;

  constructor(config: AppConfig, drain: DrainState, mails: ApprovalMailRepository, links: ApprovalLinkRepository) {
    this.housekeeping = new Housekeeping(ApprovalMailHousekeeping.name, config, drain, async () => ({
      approval_mails: await mails.deleteFinishedBefore(new Date(Date.now() - FINISHED_MAIL_RETENTION_MS)),
      approval_links: await links.deleteSpentBefore(new Date(Date.now() - SPENT_LINK_RETENTION_MS)),
    }));
  }

  start(): void {
    this.housekeeping.start();
  }

  stop(): Promise<void> {
    return this.housekeeping.stop();
  }
}
