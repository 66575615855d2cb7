import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { SmtpRelay } from '../outbox/smtp-relay';
import { ApprovalMailRepository } from './approval-mail.repository';
import { ApprovalMailService } from './approval-mail.service';

/** Approval mails one replica sends at a time, per pass. */
const BATCH = 4;
/** Without a doorbell or timer, a replica still looks for due mails this often (a lost doorbell). */
const SAFETY_POLL_MS = 60_000;
/** A due row another replica is claiming right now is not looked at again sooner than this. */
const MIN_REARM_MS = 200;

/**
 * Sends the approval mails (every replica runs one, like the outbox worker whose doorbell it
 * shares): wakes on the outbox doorbell, at the next due time (a retry or a lapsed lease) or on
 * the safety poll; claims due mails with SKIP LOCKED and sends them outside any transaction. A
 * replica that dies mid-send leaves a lease that lapses, and another replica sends the mail again
 * (at least once). On drain it stops claiming; what it holds lapses to the other replicas.
 */
@Injectable()
export class ApprovalMailWorker implements DoorbellSubscriber, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly replicaId = `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  private readonly logger = new Logger(ApprovalMailWorker.name);
  private started = false;
  private stopping = false;
  private pass: Promise<void> | undefined;
  private passAgain = false;
  private dueTimer: NodeJS.Timeout | undefined;
  private safetyTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: AppConfig,
    private readonly service: ApprovalMailService,
    private readonly mails: ApprovalMailRepository,
    private readonly relay: SmtpRelay,
    private readonly listener: DoorbellListener,
    private readonly drain: DrainState,
  ) {}

  /** Starts with the application; without a relay no approval mail is ever queued. */
  onApplicationBootstrap(): void {
    if (this.started || !this.relay.configured) return;
    this.started = true;
    this.listener.subscribe(this);
    this.drain.onDrain(() => this.stop());
    this.safetyTimer = setInterval(() => this.wake(), SAFETY_POLL_MS);
    this.safetyTimer.unref();
    this.wake();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stop();
    await this.pass;
  }

  onDoorbell(bell: Doorbell): void {
    if (bell.kind === 'outbox') this.wake();
  }

  onListenerReconnected(): void {
    this.wake();
  }

  private wake(): void {
    if (!this.started || this.stopping) return;
    if (this.pass) {
      this.passAgain = true;
      return;
    }
    this.pass = this.claimAndSend()
      .catch((err: Error) => {
        // The database may be down: the safety poll tries again.
        this.logger.warn({ msg: 'approval mail worker could not look for due mail', error: err.message });
      })
      .finally(() => {
        this.pass = undefined;
        if (this.passAgain) {
          this.passAgain = false;
          this.wake();
        }
      });
  }

  private async claimAndSend(): Promise<void> {
    for (;;) {
      if (this.stopping) return;
      const claimed = await this.mails.claimDue(this.replicaId, this.config.outboxLeaseMs, BATCH);
      await Promise.all(
        claimed.map(async (mail) => {
          const status = await this.service.send(this.replicaId, mail).catch((err: Error) => {
            // Not recorded: the lease lapses and some replica sends the mail again.
            this.logger.warn({ msg: 'approval mail attempt not recorded', mail_id: mail.id, error: err.message });
            return undefined;
          });
          this.logger.log({ msg: 'approval mail attempt', mail_id: mail.id, request_id: mail.requestId, status });
        }),
      );
      if (claimed.length < BATCH) break;
    }
    const ms = await this.mails.msUntilNextDue();
    clearTimeout(this.dueTimer);
    if (ms === undefined || this.stopping) return;
    this.dueTimer = setTimeout(() => this.wake(), Math.min(Math.max(ms, MIN_REARM_MS), SAFETY_POLL_MS));
    this.dueTimer.unref();
  }

  private stop(): void {
    this.stopping = true;
    clearTimeout(this.dueTimer);
    clearInterval(this.safetyTimer);
  }
}
