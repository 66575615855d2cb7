import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { DoorbellListener } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { Metrics } from '../metrics/metrics';
import { ClaimResult, claimantId, DueWork, DueWorkLoop } from '../outbox/due-work-loop';
import { SmtpRelay } from '../outbox/smtp-relay';
import { ApprovalMailRepository } from './approval-mail.repository';
import { ApprovalMailService } from './approval-mail.service';
import { ApprovalReplyRepository } from './approval-reply.repository';
import { ApprovalReplyService } from './approval-reply.service';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/** Approval mails one replica sends at a time, per pass. */
const BATCH = 4;

/**
 * Sends the approval mails and decides the replies to them (every replica runs one, like the outbox
 * worker: the same DueWorkLoop on the same doorbell): claims due mails and replies with SKIP LOCKED
 * and works on them outside any transaction.
 * A replica that dies mid-send leaves a lease that lapses, and another replica sends the mail
 * again (at least once). On drain it stops claiming; what it holds lapses to the other replicas.
 */
@Job('work')
@Injectable()
export class ApprovalMailWorker implements DueWork, BackgroundJob {
  readonly what = 'approval mail worker';
  private readonly replicaId = claimantId();
  private readonly logger = new Logger(ApprovalMailWorker.name);
  private readonly attempts: Counter<'outcome'>;
  private readonly loop: DueWorkLoop;

  constructor(
    private readonly config: AppConfig,
    private readonly service: ApprovalMailService,
    private readonly mails: ApprovalMailRepository,
    private readonly replyService: ApprovalReplyService,
    private readonly replies: ApprovalReplyRepository,
    private readonly relay: SmtpRelay,
    listener: DoorbellListener,
    drain: DrainState,
    metrics: Metrics,
  ) {
    this.attempts = new Counter({
      name: 'alcarta_approval_mail_attempts_total',
      help: 'Approval mail attempts by this process, by outcome (sent, temporary, permanent, obsolete, lost_claim).',
      labelNames: ['outcome'],
      registers: [metrics.registry],
    });
    this.loop = new DueWorkLoop(this, listener, drain, this.logger);
  }

  /** Without a relay no approval mail is ever queued: nothing to watch for. */
  start(): void {
    if (this.relay.configured) this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async claimAndLaunch(): Promise<ClaimResult> {
    const [mails, replies] = await Promise.all([this.sendDue(), this.decideDue()]);
    return mails && replies ? 'caught_up' : 'more';
  }

  /** Decides the due replies, one after another (each is a short transaction or two); true: caught up. */
  private async decideDue(): Promise<boolean> {
    const claimed = await this.replies.claimDue(this.replicaId, this.config.outboxLeaseMs, BATCH);
    for (const reply of claimed) {
      const outcome = await this.replyService.process(this.replicaId, reply).catch((err: Error) => {
        // Not recorded: the lease lapses and some replica decides the reply again.
        this.logger.warn({ msg: 'approval reply not decided', message_id: reply.messageId, error: err.message });
        return undefined;
      });
      this.logger.log({
        msg: 'approval reply',
        message_id: reply.messageId,
        request_id: reply.link?.requestId,
        outcome,
      });
    }
    return claimed.length < BATCH;
  }

  /** Sends the due approval mails side by side; true: caught up. */
  private async sendDue(): Promise<boolean> {
    const claimed = await this.mails.claimDue(this.replicaId, this.config.outboxLeaseMs, BATCH);
    await Promise.all(
      claimed.map(async (mail) => {
        const attempt = await this.service.send(this.replicaId, mail).catch((err: Error) => {
          // Not recorded: the lease lapses and some replica sends the mail again.
          this.logger.warn({ msg: 'approval mail attempt not recorded', mail_id: mail.id, error: err.message });
          return undefined;
        });
        if (attempt) this.attempts.inc({ outcome: attempt.status === undefined ? 'lost_claim' : attempt.outcome });
        this.logger.log({
          msg: 'approval mail attempt',
          mail_id: mail.id,
          request_id: mail.requestId,
          status: attempt?.status,
        });
      }),
    );
    return claimed.length < BATCH;
  }

  async msUntilNextDue(): Promise<number | undefined> {
    const due = (await Promise.all([this.mails.msUntilNextDue(), this.replies.msUntilNextDue()])).filter(
      (ms): ms is number => ms !== undefined,
    );
    return due.length > 0 ? Math.min(...due) : undefined;
  }
}
