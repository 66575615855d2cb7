import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, MoreThan, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { MessageEntity } from './message.entity';

@Injectable()
export class MessageRepository {
  constructor(@InjectRepository(MessageEntity) private readonly messages: Repository<MessageEntity>) {}

  async insert(manager: EntityManager, message: Omit<MessageEntity, 'createdAt'>): Promise<void> {
    await manager.insert(MessageEntity, message);
  }

  /** The ids of the inbound messages of `mailboxId` stored under these Message-IDs, by Message-ID. */
  async inboundIdsByMessageIdHeader(
    manager: EntityManager,
    mailboxId: string,
    messageIdHeaders: readonly string[],
  ): Promise<Map<string, string>> {
    const rows = await manager.find(MessageEntity, {
      select: { id: true, messageIdHeader: true },
      where: { mailboxId, direction: 'inbound', messageIdHeader: In([...new Set(messageIdHeaders)]) },
    });
    return new Map(rows.map((r) => [r.messageIdHeader!, r.id]));
  }

  findInMailbox(manager: EntityManager, mailboxId: string, id: string): Promise<MessageEntity | null> {
    return manager.findOneBy(MessageEntity, { id, mailboxId });
  }

  /** The thread a reply belongs to: that of the message it answers, when this mailbox has it. */
  async threadOf(
    manager: EntityManager,
    mailboxId: string,
    messageIdHeaders: readonly string[],
  ): Promise<string | null> {
    if (messageIdHeaders.length === 0) return null;
    const parent = await manager.findOne(MessageEntity, {
      select: { threadId: true },
      where: { mailboxId, messageIdHeader: In([...messageIdHeaders]) },
      order: { mailboxSeq: 'DESC' },
    });
    return parent?.threadId ?? null;
  }

  /** Messages of one mailbox after a position, in mailbox order. */
  listAfter(mailboxId: string, afterSeq: number, limit: number): Promise<MessageEntity[]> {
    return this.messages.find({
      where: { mailboxId, mailboxSeq: MoreThan(afterSeq) },
      order: { mailboxSeq: 'ASC' },
      take: limit,
    });
  }

  findVisible(id: string, access: MailboxAccess): Promise<MessageEntity | null> {
    return this.messages.findOneBy(access.all ? { id } : { id, mailboxId: In([...access.ids]) });
  }
}
