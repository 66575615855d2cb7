import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { InboundMessage } from './inbound-message';
import { MessageEntity } from './message.entity';

/** Runs inside the ingest transaction for each stored inbound message (e.g. bounce reports). */
export type InboundStoredHook = (
  manager: EntityManager,
  stored: MessageEntity,
  parsed: InboundMessage,
) => Promise<void>;

/** The delivery state of outbound messages, by message id, as `get_message` shows it. */
export type DeliveryLookup = (messageIds: readonly string[]) => Promise<Map<string, object>>;

/**
 * What modules built on mail add to it without mail depending on them: the outbox learns of
 * delivery reports as they are stored, and lends `get_message` the delivery state it owns.
 */
@Injectable()
export class MailHooks {
  private readonly inboundStored: InboundStoredHook[] = [];
  private deliveries: DeliveryLookup = () => Promise.resolve(new Map<string, object>());

  onInboundStored(hook: InboundStoredHook): void {
    this.inboundStored.push(hook);
  }

  provideDeliveries(lookup: DeliveryLookup): void {
    this.deliveries = lookup;
  }

  async runInboundStored(manager: EntityManager, stored: MessageEntity, parsed: InboundMessage): Promise<void> {
    for (const hook of this.inboundStored) await hook(manager, stored, parsed);
  }

  deliveriesOf(messageIds: readonly string[]): Promise<Map<string, object>> {
    return messageIds.length === 0 ? Promise.resolve(new Map<string, object>()) : this.deliveries(messageIds);
  }
}
