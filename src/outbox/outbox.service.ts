import { Injectable, OnModuleInit } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { EventLog } from '../events/event-log';
import { MailHooks } from '../mail/mail-hooks';
import { MessageEntity } from '../mail/message.entity';
import { DeliveryView, deliveryView } from './delivery.views';
import { OutboundDeliveryEntity } from './outbound-delivery.entity';
import { OutboundDeliveryRepository } from './outbound-delivery.repository';

/**
 * The durable outbox (SPEC 9): an approved message and its delivery job commit together; the
 * delivery's every status change appends a `message_delivery_changed` event in the same transaction.
 */
@Injectable()
export class OutboxService implements OnModuleInit {
  constructor(
    private readonly config: AppConfig,
    private readonly deliveries: OutboundDeliveryRepository,
    private readonly eventLog: EventLog,
    private readonly mailHooks: MailHooks,
  ) {}

  onModuleInit(): void {
    this.mailHooks.provideDeliveries((ids) => this.deliveriesOf(ids));
  }

  /**
   * Queues the delivery of `message` inside the caller's transaction (the approval), or records it
   * as `not_configured` when no relay is set.
   */
  async enqueue(manager: EntityManager, message: MessageEntity, requestId: string | null): Promise<void> {
    const now = new Date();
    const status = this.config.smtpRelayUrl ? 'queued' : 'not_configured';
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
      claimedBy: null,
      leaseExpiresAt: null,
      updatedAt: now,
    };
    await this.deliveries.insert(manager, delivery);
    await this.eventLog.appendDeliveryEvent(manager, {
      type: 'message_delivery_changed',
      mailbox_id: message.mailboxId,
      message_id: message.id,
      request_id: requestId,
      status,
      changed_at: now.toISOString(),
    });
  }

  /** The `delivery` objects of these outbound messages (those that have one). */
  async deliveriesOf(messageIds: readonly string[]): Promise<Map<string, DeliveryView>> {
    const rows = await this.deliveries.findByMessageIds(messageIds);
    return new Map(rows.map((d) => [d.messageId, deliveryView(d)]));
  }
}
