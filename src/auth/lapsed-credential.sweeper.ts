import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PeriodicJob } from '../lifecycle/periodic-job';
import { AppConfig } from '../config/app-config';
import { EventLog } from '../events/event-log';
import { CredentialRevocationHooks } from './credential-revocation';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/**
 * Ends what expired tokens still hold (stored waits, tasks) every ALCARTA_WAIT_RECHECK_SECONDS,
 * and rings `credential_revoked` for them so every replica lets go at once. Revoked tokens are
 * ended by the revocation itself; they are included here only as a safety net. Server only; safe
 * on every replica (the statements are conditional).
 */
@Job('work')
@Injectable()
export class LapsedCredentialSweeper implements BackgroundJob {
  private readonly logger = new Logger(LapsedCredentialSweeper.name);
  private readonly job: PeriodicJob;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    hooks: CredentialRevocationHooks,
    eventLog: EventLog,
    config: AppConfig,
  ) {
    this.job = new PeriodicJob(LapsedCredentialSweeper.name, config.waitRecheckMs, async () => {
      const tokenIds = await dataSource.transaction(async (manager) => {
        const ids = await hooks.revokeLapsed(manager);
        for (const tokenId of ids) await eventLog.ringDoorbell(manager, { kind: 'credential_revoked', tokenId });
        return ids;
      });
      if (tokenIds.length > 0) this.logger.log({ msg: 'ended the work of lapsed tokens', token_ids: tokenIds });
    });
  }

  start(): void {
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }
}
