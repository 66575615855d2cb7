import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { DoorbellListener } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { Metrics } from '../metrics/metrics';
import { ClaimResult, claimantId, DueWork, DueWorkLoop } from './due-work-loop';
import { ClaimedDelivery, OutboundDeliveryRepository } from './outbound-delivery.repository';
import { OutboxService } from './outbox.service';
import { OutboundRoutes } from './outbound-routes';
import { AttemptOutcome, SmtpRelay } from './smtp-relay';
import { BackgroundJob, Job } from '../lifecycle/background-job';

/** Messages one replica sends at the same time: a relay is shared, and each send holds a connection. */
export const MAX_CONCURRENT_SENDS = 4;

/**
 * The outbox worker of this replica (every replica runs one). Its DueWorkLoop wakes it when
 * something can be due (the outbox doorbell, the next due time, the safety poll). Then it claims due
 * deliveries in a short transaction (SKIP LOCKED: replicas never wait for or take each other's
 * rows), and sends each outside any transaction, at most MAX_CONCURRENT_SENDS at once. An attempt
 * ends well before its lease (see SmtpRelay), so while replicas are healthy nobody takes a message
 * another is sending; one that died mid-send leaves a lease that lapses, and another replica sends
 * the message again (at-least-once, with the same Message-ID). On drain it stops claiming and gives
 * sends in flight part of the grace period; what is left lapses to the other replicas.
 */
@Job('work')
@Injectable()
export class OutboxWorker implements DueWork, BackgroundJob {
  readonly what = 'outbox worker';
  /** Who holds a claim (`claimed_by`): this process, distinguishable from its own restarts. */
  readonly replicaId = claimantId();
  private readonly logger = new Logger(OutboxWorker.name);
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly attempts: Counter<'outcome'>;
  private readonly loop: DueWorkLoop;

  constructor(
    private readonly config: AppConfig,
    private readonly outbox: OutboxService,
    private readonly deliveries: OutboundDeliveryRepository,
    private readonly relay: SmtpRelay,
    private readonly routes: OutboundRoutes,
    private readonly listener: DoorbellListener,
    drain: DrainState,
    metrics: Metrics,
  ) {
    this.attempts = new Counter({
      name: 'alcarta_outbox_send_attempts_total',
      help: 'Delivery attempts to the outbound relay by this process, by outcome (sent, temporary, permanent, refused, lost_claim).',
      labelNames: ['outcome'],
      registers: [metrics.registry],
    });
    this.loop = new DueWorkLoop(this, listener, drain, this.logger);
  }

  /**
   * Starts watching for work. Without a relay, only mail of connected mailboxes can be due (every
   * other delivery is `not_configured`): the loop starts at the first such delivery, queued now
   * (its outbox doorbell) or before this start, so that a replica without either does no work.
   */
  start(): void {
    if (this.relay.configured) return this.loop.start();
    this.listener.subscribe({ onDoorbell: (bell) => bell.kind === 'outbox' && this.loop.start() });
    void this.deliveries
      .msUntilNextDue()
      .then((ms) => ms !== undefined && this.loop.start())
      .catch((err: Error) => {
        // The doorbell of the next queued delivery still starts it.
        this.logger.warn({ msg: 'outbox worker could not look for due mail at start', error: err.message });
      });
  }

  /** Claims no more; resolves when the pass in progress has ended (sends in flight finish on drain). */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  async claimAndLaunch(): Promise<ClaimResult> {
    const free = MAX_CONCURRENT_SENDS - this.inFlight.size;
    // Full: each finishing send wakes the worker again.
    if (free <= 0) return 'full';
    const claimed = await this.outbox.claim(this.replicaId, free);
    for (const job of claimed) this.launch(job);
    return claimed.length < free ? 'caught_up' : 'more';
  }

  msUntilNextDue(): Promise<number | undefined> {
    return this.deliveries.msUntilNextDue();
  }

  private launch({ delivery }: ClaimedDelivery): void {
    const id = delivery.messageId;
    const sending = this.send(id, delivery.message!, delivery.requestId)
      .catch((err: Error) => {
        // The outcome could not be recorded (database trouble): the lease lapses and some replica
        // sends the message again.
        this.logger.warn({ msg: 'outbox could not record a delivery attempt', message_id: id, error: err.message });
      })
      .finally(() => {
        this.inFlight.delete(id);
        this.loop.wake();
      });
    this.inFlight.set(id, sending);
  }

  private async send(
    messageId: string,
    message: NonNullable<ClaimedDelivery['delivery']['message']>,
    requestId: string | null,
  ): Promise<void> {
    const outcome = (await this.outbox.refusalOf(message, requestId)) ?? (await this.attempt(message));
    const recorded = await this.outbox.recordOutcome(this.replicaId, messageId, outcome);
    this.attempts.inc({ outcome: recorded === undefined ? 'lost_claim' : outcome.kind });
    this.logger.log({
      msg: 'outbound delivery attempt',
      message_id: messageId,
      outcome: outcome.kind,
      status: recorded,
    });
  }

  /** Through the mailbox's own route (a connected account) when it has one, else the shared relay. */
  private async attempt(message: NonNullable<ClaimedDelivery['delivery']['message']>): Promise<AttemptOutcome> {
    const route = await this.routes.routeFor(message.mailboxId);
    if (!route) return this.relay.send(message, { kind: 'message', mailboxId: message.mailboxId });
    return route.send(message, AbortSignal.timeout(this.relay.attemptTimeoutMs));
  }

  /**
   * Drain (the loop no longer claims): sends in flight get half the grace period to finish and be
   * recorded. The rest keep their lease, which lapses, and another replica sends them.
   */
  async drained(): Promise<void> {
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.config.shutdownGraceMs / 2);
    });
    await Promise.race([Promise.all(this.inFlight.values()), grace]).finally(() => clearTimeout(timer));
  }
}
