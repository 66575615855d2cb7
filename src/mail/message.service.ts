import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Caller } from '../kernel/caller';
import { notFound } from '../kernel/errors';
import { newId } from '../common/ids';
import { EventLog } from '../events/event-log';
import { InboundMessage, withinInboundLimits } from './inbound-message';
import { MailHooks } from './mail-hooks';
import { SenderVerdict, UNAUTHENTICATED, UNVERIFIED_SENDER } from './message-authentication';
import { MailboxRepository } from './mailbox.repository';
import { MessageCursor } from './message-cursor';
import { MessageEntity } from './message.entity';
import { MessageRepository } from './message.repository';
import { MessageSequence } from './message-sequence';
import { messageDetail, messageSummary } from './message.views';

/** One inbound message for some mailboxes (see MessageService.storeEach). */
export interface InboundDelivery {
  mailboxIds: readonly string[];
  message: InboundMessage;
  verdict?: SenderVerdict;
}

/** One mailbox's copy of a stored inbound message. */
export interface StoredInbound {
  mailboxId: string;
  messageId: string;
  /** The mailbox already had an inbound message with this Message-ID; nothing was stored. */
  duplicate: boolean;
}

/** RFC 5322 3.6.4: a reply's References are the parent's References followed by the parent's Message-ID. */
function referencesOfReply(parent: MessageEntity): string[] {
  const chain = parent.references.length > 0 ? parent.references : parent.inReplyTo ? [parent.inReplyTo] : [];
  return parent.messageIdHeader ? [...chain, parent.messageIdHeader] : chain;
}

export interface OutboundMessage {
  from: string;
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html: string | null;
  inReplyToMessageId: string | null;
}

@Injectable()
export class MessageService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly mailboxes: MailboxRepository,
    private readonly messages: MessageRepository,
    private readonly sequence: MessageSequence,
    private readonly eventLog: EventLog,
    private readonly hooks: MailHooks,
  ) {}

  /**
   * Stores an inbound message that a caller posted to one mailbox (REST ingest): the caller must see
   * the mailbox, then it is stored as any inbound mail is (see store()). A verdict given as a
   * function is worked out only after the access check, so nobody makes us look up DNS for a
   * mailbox they cannot reach.
   */
  async ingest(
    caller: Caller,
    mailboxId: string,
    message: InboundMessage,
    verdict: SenderVerdict | (() => Promise<SenderVerdict>) = UNVERIFIED_SENDER,
  ): Promise<StoredInbound> {
    if (!(await this.mailboxes.findVisible(mailboxId, caller.mailboxAccess))) throw notFound('mailbox', mailboxId);
    const [stored] = await this.store([mailboxId], message, typeof verdict === 'function' ? await verdict() : verdict);
    return stored;
  }

  /**
   * Stores one inbound message in each of `mailboxIds` in one transaction and announces it: either
   * every copy commits or none does, so a sender told "accepted" (SMTP 250) never loses a copy.
   * Idempotent on the Message-ID header per mailbox: a mailbox that already has an inbound message
   * with it keeps the first and reports `duplicate`. Mailbox locks are taken in id order, so
   * concurrent deliveries to overlapping mailboxes cannot deadlock; the lock also makes concurrent
   * duplicates wait for each other. Over-long header values are stored cut to INBOUND_LIMITS.
   * Callers resolve (and check access to) the mailboxes; results come back in their order.
   */
  async store(
    mailboxIds: readonly string[],
    message: InboundMessage,
    verdict: SenderVerdict = UNVERIFIED_SENDER,
  ): Promise<StoredInbound[]> {
    const [stored] = await this.storeEach([{ mailboxIds, message, verdict }]);
    return stored;
  }

  /**
   * store() for several messages in ONE transaction (group commit): one lock round and one commit
   * for a burst of SMTP deliveries, instead of one each, which is what bounds the rate of mail into
   * one mailbox (its writers serialise on the mailbox lock). All commit or none does; the result of
   * each delivery comes back in its place. A message repeated within the batch is a duplicate there
   * too (the transaction sees its own rows). `alsoInTransaction` runs last in the same transaction
   * (a connected folder records how far it has stored): if it throws, nothing is stored.
   */
  async storeEach(
    deliveries: readonly InboundDelivery[],
    alsoInTransaction?: (manager: EntityManager) => Promise<void>,
  ): Promise<StoredInbound[][]> {
    const inputs = deliveries.map((d) => ({
      mailboxIds: d.mailboxIds,
      input: withinInboundLimits(d.message),
      verdict: d.verdict ?? UNVERIFIED_SENDER,
    }));
    const lockOrder = [...new Set(inputs.flatMap((d) => d.mailboxIds))].sort();
    return this.dataSource.transaction(async (manager) => {
      // Per mailbox, once for the whole batch: the lock, and the Message-IDs it already holds.
      const known = new Map<string, Map<string, string>>();
      for (const mailboxId of lockOrder) {
        await this.sequence.lock(manager, mailboxId);
        const headers = inputs
          .filter((d) => d.mailboxIds.includes(mailboxId) && d.input.messageIdHeader)
          .map((d) => d.input.messageIdHeader!);
        known.set(
          mailboxId,
          headers.length > 0
            ? await this.messages.inboundIdsByMessageIdHeader(manager, mailboxId, headers)
            : new Map<string, string>(),
        );
      }
      const results: StoredInbound[][] = [];
      const appended = new Set<string>();
      for (const delivery of inputs) {
        const stored = new Map<string, StoredInbound>();
        for (const mailboxId of new Set(delivery.mailboxIds)) {
          const one = await this.storeOne(manager, mailboxId, delivery.input, delivery.verdict, known.get(mailboxId)!);
          if (!one.duplicate) appended.add(mailboxId);
          stored.set(mailboxId, one);
        }
        results.push(delivery.mailboxIds.map((id) => stored.get(id)!));
      }
      // One doorbell per mailbox wakes its waits for every message of the batch.
      for (const mailboxId of appended) await this.eventLog.ringDoorbell(manager, { kind: 'message', mailboxId });
      await alsoInTransaction?.(manager);
      return results;
    });
  }

  /**
   * Stores one copy, under the mailbox lock the caller holds (storeEach). `known` maps the Message-IDs
   * the mailbox holds to their messages; a new one is added, so a repeat later in the batch is a
   * duplicate too.
   */
  private async storeOne(
    manager: EntityManager,
    mailboxId: string,
    input: InboundMessage,
    verdict: SenderVerdict,
    known: Map<string, string>,
  ): Promise<StoredInbound> {
    const existing = input.messageIdHeader ? known.get(input.messageIdHeader) : undefined;
    if (existing) return { mailboxId, messageId: existing, duplicate: true };
    const parents = [input.inReplyTo, ...[...input.references].reverse()].filter((h): h is string => !!h);
    const message = await this.append(
      manager,
      mailboxId,
      {
        direction: 'inbound',
        from: input.from,
        to: input.to,
        cc: input.cc,
        subject: input.subject,
        text: input.text,
        html: input.html,
        messageIdHeader: input.messageIdHeader,
        inReplyTo: input.inReplyTo,
        references: input.references,
        authentication: verdict.authentication,
        fromVerified: verdict.fromVerified,
        threadId: (await this.messages.threadOf(manager, mailboxId, parents)) ?? newId('thr'),
        receivedAt: input.receivedAt ?? new Date(),
      },
      false,
    );
    if (input.messageIdHeader) known.set(input.messageIdHeader, message.id);
    await this.hooks.runInboundStored(manager, message, input);
    return { mailboxId, messageId: message.id, duplicate: false };
  }

  /** Records a message the mailbox sends, inside the caller's transaction (an approval). */
  async recordOutbound(manager: EntityManager, mailboxId: string, draft: OutboundMessage): Promise<MessageEntity> {
    const parent = draft.inReplyToMessageId
      ? await this.messages.findInMailbox(manager, mailboxId, draft.inReplyToMessageId)
      : null;
    const id = newId('msg');
    const domain = draft.from.split('@')[1] ?? 'alcarta.invalid';
    return this.append(manager, mailboxId, {
      id,
      direction: 'outbound',
      from: draft.from,
      to: draft.to,
      cc: draft.cc,
      subject: draft.subject,
      text: draft.text,
      html: draft.html,
      messageIdHeader: `<${id}@${domain}>`,
      inReplyTo: parent?.messageIdHeader ?? null,
      references: parent ? referencesOfReply(parent) : [],
      authentication: UNAUTHENTICATED,
      fromVerified: false,
      threadId: parent?.threadId ?? newId('thr'),
      receivedAt: new Date(),
    });
  }

  /** Whether `messageId` is a message of `mailboxId` visible to the caller (for replies). */
  async assertInMailbox(caller: Caller, mailboxId: string, messageId: string): Promise<void> {
    const message = await this.messages.findVisible(messageId, caller.mailboxAccess);
    if (!message || message.mailboxId !== mailboxId) throw notFound('message', messageId);
  }

  async list(caller: Caller, mailboxId: string, sinceCursor: string | undefined, limit: number) {
    const mailbox = await this.mailboxes.findVisible(mailboxId, caller.mailboxAccess);
    if (!mailbox) throw notFound('mailbox', mailboxId);
    const cursor = sinceCursor === undefined ? MessageCursor.START : MessageCursor.parse(sinceCursor);
    const page = await this.messages.listAfter(mailboxId, cursor.position(mailbox.cursorKey), limit);
    const next = page.length > 0 ? cursor.advancedTo([[mailbox.cursorKey, page[page.length - 1].mailboxSeq]]) : cursor;
    return { messages: page.map(messageSummary), next_cursor: next.toString() };
  }

  async get(caller: Caller, messageId: string) {
    const message = await this.messages.findVisible(messageId, caller.mailboxAccess);
    if (!message) throw notFound('message', messageId);
    if (message.direction === 'inbound') return messageDetail(message);
    const delivery = (await this.hooks.deliveriesOf([message.id])).get(message.id);
    return { ...messageDetail(message), ...(delivery && { delivery }) };
  }

  /** Appends a message and its event; `ring: false` leaves the mailbox's doorbell to the caller. */
  private async append(
    manager: EntityManager,
    mailboxId: string,
    fields: Omit<MessageEntity, 'id' | 'mailboxId' | 'mailboxSeq' | 'createdAt'> & { id?: string },
    ring = true,
  ): Promise<MessageEntity> {
    const message: Omit<MessageEntity, 'createdAt'> = {
      ...fields,
      id: fields.id ?? newId('msg'),
      mailboxId,
      mailboxSeq: await this.sequence.next(manager, mailboxId),
    };
    await this.messages.insert(manager, message);
    await this.eventLog.appendMessageEvent(
      manager,
      {
        type: message.direction === 'inbound' ? 'message_received' : 'message_sent',
        mailbox_id: mailboxId,
        message_id: message.id,
        from: message.from,
        subject: message.subject,
        received_at: message.receivedAt.toISOString(),
        ...(message.direction === 'inbound' && {
          authentication: message.authentication,
          from_verified: message.fromVerified,
        }),
      },
      ring,
    );
    return message as MessageEntity;
  }
}
