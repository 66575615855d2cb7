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
 * The connected account behind a mailbox (docs/connected-mailboxes.md), lent by the module that
 * owns it. `prepare` does everything that can fail before the mailbox's transaction (checking the
 * settings, signing in to the account, sealing the secrets); `save` and `remove` run inside it, so
 * a mailbox is never stored with half a source.
 */
export interface MailboxSourceHandler<Prepared = unknown> {
  /** `mailboxId`: the mailbox whose stored source `source` is merged onto (a PATCH); undefined for a new one. */
  prepare(mailboxId: string | undefined, source: unknown): Promise<Prepared>;
  save(manager: EntityManager, mailboxId: string, prepared: Prepared): Promise<void>;
  remove(manager: EntityManager, mailboxId: string): Promise<void>;
  /** The `source` of each mailbox that has one, as the mailbox view shows it. */
  views(mailboxIds: readonly string[]): Promise<Map<string, object>>;
}

/**
 * What modules built on mail add to it without mail depending on them: the outbox learns of
 * delivery reports as they are stored, and lends `get_message` the delivery state it owns; the
 * connected mailboxes lend the mailbox API their sources.
 */
@Injectable()
export class MailHooks {
  private readonly inboundStored: InboundStoredHook[] = [];
  private deliveries: DeliveryLookup = () => Promise.resolve(new Map<string, object>());
  private sourceHandler: MailboxSourceHandler | undefined;

  onInboundStored(hook: InboundStoredHook): void {
    this.inboundStored.push(hook);
  }

  provideDeliveries(lookup: DeliveryLookup): void {
    this.deliveries = lookup;
  }

  provideSources(handler: MailboxSourceHandler): void {
    this.sourceHandler = handler;
  }

  /** The handler of connected accounts; every application that serves the mailbox API registers one. */
  get sources(): MailboxSourceHandler {
    if (!this.sourceHandler) throw new Error('no handler of mailbox sources is registered');
    return this.sourceHandler;
  }

  async runInboundStored(manager: EntityManager, stored: MessageEntity, parsed: InboundMessage): Promise<void> {
    for (const hook of this.inboundStored) await hook(manager, stored, parsed);
  }

  deliveriesOf(messageIds: readonly string[]): Promise<Map<string, object>> {
    return messageIds.length === 0 ? Promise.resolve(new Map<string, object>()) : this.deliveries(messageIds);
  }
}
