import { Injectable } from '@nestjs/common';
import { Caller } from '../auth/caller';
import { notFound } from '../common/errors';
import { newId } from '../common/ids';
import { MailboxEntity } from './mailbox.entity';
import { MailboxRepository } from './mailbox.repository';
import { mailboxView } from './message.views';

@Injectable()
export class MailboxService {
  constructor(private readonly mailboxes: MailboxRepository) {}

  /** Addresses are stored lower-case so that one address cannot become two mailboxes. */
  async create(address: string, name: string | null) {
    const mailbox = await this.mailboxes.insert({ id: newId('mbx'), address: address.trim().toLowerCase(), name });
    return mailboxView(mailbox);
  }

  async list(caller: Caller) {
    return { mailboxes: (await this.mailboxes.list(caller.mailboxAccess)).map(mailboxView) };
  }

  async getVisible(caller: Caller, mailboxId: string): Promise<MailboxEntity> {
    const mailbox = await this.mailboxes.findVisible(mailboxId, caller.mailboxAccess);
    if (!mailbox) throw notFound('mailbox', mailboxId);
    return mailbox;
  }

  /** The ids among `ids` that name no mailbox. */
  async unknownIds(ids: readonly string[]): Promise<string[]> {
    const existing = new Set(await this.mailboxes.existingIds(ids));
    return ids.filter((id) => !existing.has(id));
  }
}
