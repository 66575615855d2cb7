import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Caller } from '../kernel/caller';
import { conflict, notFound } from '../kernel/errors';
import { repairText } from '../common/text-safety';
import { AppConfig } from '../config/app-config';
import { EventLog } from '../events/event-log';
import { AuditLog } from '../audit/audit-log';
import { DeliveryReport } from '../mail/delivery-report';
import { InboundMessage } from '../mail/inbound-message';
import { MailHooks } from '../mail/mail-hooks';
import { MessageEntity } from '../mail/message.entity';
import { DeliveryView, deliveryView, OutboxEntryView, outboxEntryView } from './delivery.views';
import { DeliveryStatus, OutboundDeliveryEntity } from './outbound-delivery.entity';
import { ClaimedDelivery, DeliveryChanges, OutboundDeliveryRepository } from './outbound-delivery.repository';
import { afterTemporaryFailure } from './retry-policy';
import { OutboundRoutes } from './outbound-routes';
import { AttemptOutcome } from './smtp-relay';

/**
 * Asked before every send attempt whether a message may leave; undefined lets it go. The module that
 * knows what a person approved registers one, so the outbox need not know about approvals.
 */
export type SendCheck = (message: MessageEntity, requestId: string | null) => Promise<SendRefusal | undefined>;

/** A message a SendCheck would not let leave: it is not sent, and its delivery fails. */
export interface SendRefusal {
  kind: 'refused';
  reason: 'content_changed';
  error: string;
}

/** How a delivery attempt ended: the relay's answer, or a refusal before anything was sent. */
export type SendOutcome = AttemptOutcome | SendRefusal;

/** Longest bounce description stored as the delivery's error. */
const MAX_BOUNCE_TEXT = 2000;

/**
 * The durable outbox (docs/mail.md): an approved message and its delivery job commit together; the
 * delivery's every status change appends a `message_delivery_changed` event in the same transaction.
 * The state machine lives here; OutboxWorker drives the sending.
 */
@Injectable()
export class OutboxService implements OnModuleInit {
  private readonly sendChecks: SendCheck[] = [];

  constructor(
    private readonly config: AppConfig,
    private readonly deliveries: OutboundDeliveryRepository,
    private readonly eventLog: EventLog,
    private readonly mailHooks: MailHooks,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly routes: OutboundRoutes,
    private readonly audit: AuditLog,
  ) {}

  onModuleInit(): void {
    this.mailHooks.provideDeliveries((ids) => this.deliveriesOf(ids));
    this.mailHooks.onInboundStored((manager, stored, parsed) => this.noteBounce(manager, stored, parsed));
  }

  /** Adds a check that every send attempt must pass (see SendCheck). */
  checkBeforeSend(check: SendCheck): void {
    this.sendChecks.push(check);
  }

  /** The first refusal of the registered checks for this message, or undefined when it may leave. */
  async refusalOf(message: MessageEntity, requestId: string | null): Promise<SendRefusal | undefined> {
    for (const check of this.sendChecks) {
      const refusal = await check(message, requestId);
      if (refusal) return refusal;
    }
    return undefined;
  }

  /**
   * Queues the delivery of `message` inside the caller's transaction (the approval), or records it
   * as `not_configured` when it has no way out: no relay is set and its mailbox has no route of its
   * own (a connected account's submission server).
   */
  async enqueue(manager: EntityManager, message: MessageEntity, requestId: string | null): Promise<DeliveryView> {
    const now = new Date();
    const status = (await this.canSend(message.mailboxId, manager)) ? 'queued' : 'not_configured';
    const delivery: OutboundDeliveryEntity = {
      messageId: message.id,
      mailboxId: message.mailboxId,
      requestId,
      status,
      attempts: 0,
      queuedAt: now,
      nextAttemptAt: status === 'queued' ? now : null,
      lastAttemptAt: null,
      response: null,
      error: null,
      reason: null,
      claimedBy: null,
      leaseExpiresAt: null,
      updatedAt: now,
    };
    await this.deliveries.insert(manager, delivery);
    await this.changed(manager, delivery, status, now);
    return deliveryView(delivery);
  }

  private async canSend(mailboxId: string, manager: EntityManager): Promise<boolean> {
    return !!this.config.smtpRelayUrl || (await this.routes.hasOwnRoute(mailboxId, manager));
  }

  /** The `delivery` objects of these outbound messages (those that have one). */
  async deliveriesOf(messageIds: readonly string[]): Promise<Map<string, DeliveryView>> {
    const rows = await this.deliveries.findByMessageIds(messageIds);
    return new Map(rows.map((d) => [d.messageId, deliveryView(d)]));
  }

  /** `GET /v1/outbox`: deliveries of the caller's mailboxes, newest first. */
  async list(caller: Caller, status: DeliveryStatus | undefined, limit: number) {
    const rows = await this.deliveries.list(caller.mailboxAccess, status, limit);
    return { deliveries: rows.map(outboxEntryView) };
  }

  /**
   * `POST /v1/outbox/{message_id}/retry`: a `failed` delivery is queued again, with a fresh retry
   * window. Other states are a conflict: the message is on its way, delivered, or bounced.
   */
  async retry(caller: Caller, messageId: string): Promise<OutboxEntryView> {
    const retried = await this.dataSource.transaction(async (manager) => {
      const delivery = await this.deliveries.findVisibleForUpdate(manager, messageId, caller.mailboxAccess);
      if (!delivery) throw notFound('message', messageId);
      if (delivery.status !== 'failed') {
        throw conflict(
          'delivery_not_failed',
          `Only a failed delivery can be retried; this one is ${delivery.status}.`,
          {
            status: delivery.status,
          },
        );
      }
      if (!(await this.canSend(delivery.mailboxId, manager))) {
        throw conflict('relay_not_configured', 'No outbound relay is configured (ALCARTA_SMTP_RELAY_URL).');
      }
      const now = new Date();
      const changes: DeliveryChanges = {
        status: 'queued',
        queuedAt: now,
        nextAttemptAt: now,
        error: null,
        reason: null,
        response: null,
        updatedAt: now,
      };
      await this.deliveries.update(manager, messageId, changes);
      await this.changed(manager, delivery, 'queued', now);
      return delivery.messageId;
    });
    const [row] = await this.deliveries.findWithMessages([retried]);
    return outboxEntryView(row);
  }

  /** Claims due deliveries for `replicaId` (one short transaction), each with its message. */
  async claim(replicaId: string, limit: number): Promise<ClaimedDelivery[]> {
    return this.dataSource.transaction(async (manager) => {
      const claimed = await this.deliveries.claimDue(manager, replicaId, this.config.outboxLeaseMs, limit);
      for (const { delivery, previousStatus } of claimed) {
        // A lapsed claim taken over stays `sending`: no status change, no event.
        if (previousStatus !== 'sending') await this.changed(manager, delivery, 'sending', delivery.updatedAt);
      }
      return claimed;
    });
  }

  /**
   * Records how an attempt ended, if `replicaId` still holds the claim (else another replica took
   * the message over after the lease lapsed, or a bounce arrived, and their record stands).
   * Returns the status recorded, or undefined when the claim was lost.
   */
  async recordOutcome(replicaId: string, messageId: string, outcome: SendOutcome): Promise<DeliveryStatus | undefined> {
    return this.dataSource.transaction(async (manager) => {
      const held = await this.deliveries.lockClaim(manager, messageId, replicaId);
      if (!held) return undefined;
      const { delivery, now } = held;
      const released = { claimedBy: null, leaseExpiresAt: null, updatedAt: now };
      let changes: DeliveryChanges;
      if (outcome.kind === 'sent') {
        changes = { ...released, status: 'sent', response: outcome.response, error: null, nextAttemptAt: null };
      } else if (outcome.kind === 'permanent') {
        changes = { ...released, status: 'failed', error: outcome.error, reason: 'relay_refused', nextAttemptAt: null };
      } else if (outcome.kind === 'refused') {
        changes = { ...released, status: 'failed', error: outcome.error, reason: outcome.reason, nextAttemptAt: null };
      } else {
        const next = afterTemporaryFailure(delivery, now, {
          baseMs: this.config.smtpRetryBaseMs,
          maxMs: this.config.smtpRetryMaxMs,
        });
        changes =
          next.status === 'retrying'
            ? { ...released, status: 'retrying', error: outcome.error, nextAttemptAt: next.nextAttemptAt }
            : {
                ...released,
                status: 'failed',
                error: `${outcome.error} (no more retries after ${delivery.attempts} attempts)`,
                reason: 'retries_exhausted',
                nextAttemptAt: null,
              };
      }
      await this.deliveries.update(manager, messageId, changes);
      await this.changed(manager, delivery, changes.status!, now);
      await this.audit.append(manager, {
        action: 'message_send_attempted',
        actor: { system: `outbox:${replicaId}` },
        subject: {
          message_id: messageId,
          mailbox_id: delivery.mailboxId,
          request_id: delivery.requestId,
          status: changes.status,
          reason: changes.reason ?? null,
        },
      });
      return changes.status;
    });
  }

  /**
   * The ingest hook: a delivery status notification that reports a failure for a message this
   * mailbox sent marks that message `bounced`, in the transaction that stores the report.
   */
  private async noteBounce(manager: EntityManager, stored: MessageEntity, parsed: InboundMessage): Promise<void> {
    const report = parsed.deliveryReport;
    if (!report?.originalMessageId) return;
    const failed = report.recipients.filter((r) => r.action === 'failed');
    if (failed.length === 0) return;
    const bounced = await this.deliveries.findBounceable(manager, stored.mailboxId, report.originalMessageId);
    const now = new Date();
    for (const delivery of bounced) {
      await this.deliveries.update(manager, delivery.messageId, {
        status: 'bounced',
        error: bounceText(report),
        reason: null,
        nextAttemptAt: null,
        claimedBy: null,
        leaseExpiresAt: null,
        updatedAt: now,
      });
      await this.changed(manager, delivery, 'bounced', now);
    }
  }

  /**
   * The `message_delivery_changed` event of a status change. Queued work also rings the outbox
   * doorbell, so a worker on some replica picks it up at once (a retry's doorbell lets every
   * replica arm its timer for it).
   */
  private async changed(
    manager: EntityManager,
    delivery: Pick<OutboundDeliveryEntity, 'messageId' | 'mailboxId' | 'requestId'>,
    status: DeliveryStatus,
    at: Date,
  ): Promise<void> {
    await this.eventLog.appendDeliveryEvent(manager, {
      type: 'message_delivery_changed',
      mailbox_id: delivery.mailboxId,
      message_id: delivery.messageId,
      request_id: delivery.requestId,
      status,
      changed_at: at.toISOString(),
    });
    if (status === 'queued' || status === 'retrying') {
      await this.eventLog.ringDoorbell(manager, { kind: 'outbox', mailboxId: delivery.mailboxId });
    }
  }
}

/** `bounced: someone@example.org 5.1.1 (smtp; 550 5.1.1 User unknown)`, one entry per failed recipient. */
function bounceText(report: DeliveryReport): string {
  const parts = report.recipients
    .filter((r) => r.action === 'failed')
    .map((r) =>
      [r.recipient ?? 'a recipient', r.status, r.diagnostic ? `(${r.diagnostic})` : null].filter(Boolean).join(' '),
    );
  const text = repairText(`bounced: ${parts.join('; ')}`);
  return text.length > MAX_BOUNCE_TEXT ? `${text.slice(0, MAX_BOUNCE_TEXT)}…` : text;
}
