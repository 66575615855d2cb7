import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { Metrics } from '../metrics/metrics';
import { ClaimedDelivery, OutboundDeliveryRepository } from './outbound-delivery.repository';
import { OutboxService } from './outbox.service';
import { SmtpRelay } from './smtp-relay';

/** Messages one replica sends at the same time: a relay is shared, and each send holds a connection. */
export const MAX_CONCURRENT_SENDS = 4;
/**
 * Without any doorbell or timer, a replica still looks for due work this often (a doorbell lost
 * while the listener was down). Idle cost: two small indexed queries per interval.
 */
const SAFETY_POLL_MS = 60_000;
/** A due row that another replica is claiming right now is not looked at again sooner than this. */
const MIN_REARM_MS = 200;

/**
 * The outbox worker of this replica (every replica runs one). It sleeps until something can be
 * due: the outbox doorbell (a message was queued or re-queued, on any replica), a timer at the next
 * due time (a retry, or a lease that lapses), or the safety poll. Then it claims due deliveries in a
 * short transaction (SKIP LOCKED: replicas never wait for or take each other's rows), and sends each
 * outside any transaction, at most MAX_CONCURRENT_SENDS at once. An attempt ends well before its
 * lease (see SmtpRelay), so while replicas are healthy nobody takes a message another is sending;
 * one that died mid-send leaves a lease that lapses, and another replica sends the message again
 * (at-least-once, with the same Message-ID). On drain it stops claiming and gives sends in flight
 * part of the grace period; what is left lapses to the other replicas.
 */
@Injectable()
export class OutboxWorker implements DoorbellSubscriber {
  /** Who holds a claim (`claimed_by`): this process, distinguishable from its own restarts. */
  readonly replicaId = `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  private readonly logger = new Logger(OutboxWorker.name);
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly attempts: Counter<'outcome'>;
  private started = false;
  private stopping = false;
  private pass: Promise<void> | undefined;
  private passAgain = false;
  private dueTimer: NodeJS.Timeout | undefined;
  private safetyTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: AppConfig,
    private readonly outbox: OutboxService,
    private readonly deliveries: OutboundDeliveryRepository,
    private readonly relay: SmtpRelay,
    private readonly listener: DoorbellListener,
    private readonly drain: DrainState,
    metrics: Metrics,
  ) {
    this.attempts = new Counter({
      name: 'alcarta_outbox_send_attempts_total',
      help: 'Delivery attempts to the outbound relay by this process, by outcome (sent, temporary, permanent, lost_claim).',
      labelNames: ['outcome'],
      registers: [metrics.registry],
    });
  }

  /** Starts watching for work; without a relay there is nothing to send. */
  start(): void {
    if (this.started || !this.relay.configured) return;
    this.started = true;
    this.listener.subscribe(this);
    this.drain.onDrain(() => this.stop());
    this.safetyTimer = setInterval(() => this.wake(), SAFETY_POLL_MS);
    this.safetyTimer.unref();
    this.wake();
  }

  onDoorbell(bell: Doorbell): void {
    if (bell.kind === 'outbox') this.wake();
  }

  onListenerReconnected(): void {
    this.wake();
  }

  /** Looks for due work now; a wake-up during a pass makes the pass run once more. */
  private wake(): void {
    if (!this.started || this.stopping) return;
    if (this.pass) {
      this.passAgain = true;
      return;
    }
    this.pass = this.claimAndSend()
      .catch((err: Error) => {
        // The database may be down: the safety poll tries again.
        this.logger.warn({ msg: 'outbox worker could not look for due mail', error: err.message });
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
      const free = MAX_CONCURRENT_SENDS - this.inFlight.size;
      // Full: each finishing send wakes the worker again.
      if (free <= 0) return;
      const claimed = await this.outbox.claim(this.replicaId, free);
      for (const job of claimed) this.launch(job);
      if (claimed.length < free) break;
    }
    await this.armDueTimer();
  }

  /** Sleeps until the next delivery falls due (on any replica), or the safety poll. */
  private async armDueTimer(): Promise<void> {
    const ms = await this.deliveries.msUntilNextDue();
    clearTimeout(this.dueTimer);
    if (ms === undefined || this.stopping) return;
    this.dueTimer = setTimeout(() => this.wake(), Math.min(Math.max(ms, MIN_REARM_MS), SAFETY_POLL_MS));
    this.dueTimer.unref();
  }

  private launch({ delivery }: ClaimedDelivery): void {
    const id = delivery.messageId;
    const sending = this.send(id, delivery.message!)
      .catch((err: Error) => {
        // The outcome could not be recorded (database trouble): the lease lapses and some replica
        // sends the message again.
        this.logger.warn({ msg: 'outbox could not record a delivery attempt', message_id: id, error: err.message });
      })
      .finally(() => {
        this.inFlight.delete(id);
        this.wake();
      });
    this.inFlight.set(id, sending);
  }

  private async send(messageId: string, message: NonNullable<ClaimedDelivery['delivery']['message']>): Promise<void> {
    const outcome = await this.relay.send(message);
    const recorded = await this.outbox.recordOutcome(this.replicaId, messageId, outcome);
    this.attempts.inc({ outcome: recorded === undefined ? 'lost_claim' : outcome.kind });
    this.logger.log({
      msg: 'outbound delivery attempt',
      message_id: messageId,
      outcome: outcome.kind,
      status: recorded,
    });
  }

  /**
   * Drain: no new claims; sends in flight get half the grace period to finish and be recorded.
   * The rest keep their lease, which lapses, and another replica sends them.
   */
  private async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.dueTimer);
    clearInterval(this.safetyTimer);
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.config.shutdownGraceMs / 2);
    });
    await Promise.race([Promise.all(this.inFlight.values()), grace]).finally(() => clearTimeout(timer));
  }
}
