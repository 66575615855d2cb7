import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Caller } from '../auth/caller';
import { notFound } from '../common/errors';
import { newId } from '../common/ids';
import { EventLog } from '../events/event-log';
import { InboundMessage, withinInboundLimits } from './inbound-message';
import { MailboxRepository } from './mailbox.repository';
import { MessageCursor } from './message-cursor';
import { MessageEntity } from './message.entity';
import { MessageRepository } from './message.repository';
import { MessageSequence } from './message-sequence';
import { messageDetail, messageSummary } from './message.views';

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
  ) {}

  /**
   * Stores an inbound message and announces it. Idempotent on the Message-ID header: a second
   * ingest of the same Message-ID into the same mailbox returns the first message and changes
   * nothing. The mailbox lock taken first makes concurrent duplicates wait for each other.
   * Over-long header values are stored cut to INBOUND_LIMITS.
   */
  async ingest(
    caller: Caller,
    mailboxId: string,
    message: InboundMessage,
  ): Promise<{ messageId: string; duplicate: boolean }> {
    const input = withinInboundLimits(message);
    if (!(await this.mailboxes.findVisible(mailboxId, caller.mailboxAccess))) throw notFound('mailbox', mailboxId);
    return this.dataSource.transaction(async (manager) => {
      await this.sequence.lock(manager, mailboxId);
      if (input.messageIdHeader) {
        const existing = await this.messages.findInboundByMessageIdHeader(manager, mailboxId, input.messageIdHeader);
        if (existing) return { messageId: existing.id, duplicate: true };
      }
      const parents = [input.inReplyTo, ...[...input.references].reverse()].filter((h): h is string => !!h);
      const message = await this.append(manager, mailboxId, {
        direction: 'inbound',
        from: input.from,
        to: input.to,
        cc: input.cc,
        subject: input.subject,
        text: input.text,
        html: input.html,
        messageIdHeader: input.messageIdHeader,
        inReplyTo: input.inReplyTo,
        threadId: (await this.messages.threadOf(manager, mailboxId, parents)) ?? newId('thr'),
        receivedAt: input.receivedAt ?? new Date(),
      });
      return { messageId: message.id, duplicate: false };
    });
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
    return messageDetail(message);
  }

  private async append(
    manager: EntityManager,
    mailboxId: string,
    fields: Omit<MessageEntity, 'id' | 'mailboxId' | 'mailboxSeq' | 'createdAt'> & { id?: string },
  ): Promise<MessageEntity> {
    const message: Omit<MessageEntity, 'createdAt'> = {
      ...fields,
      id: fields.id ?? newId('msg'),
      mailboxId,
      mailboxSeq: await this.sequence.next(manager, mailboxId),
    };
    await this.messages.insert(manager, message);
    await this.eventLog.appendMessageEvent(manager, {
      type: message.direction === 'inbound' ? 'message_received' : 'message_sent',
      mailbox_id: mailboxId,
      message_id: message.id,
      from: message.from,
      subject: message.subject,
      received_at: message.receivedAt.toISOString(),
    });
    return message as MessageEntity;
  }
}
