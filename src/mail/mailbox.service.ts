import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Caller } from '../kernel/caller';
import { AlcartaError, notFound } from '../kernel/errors';
import { newId } from '../common/ids';
import { MailboxEntity } from './mailbox.entity';
import { MailboxRepository } from './mailbox.repository';
import { mailboxView } from './message.views';

@Injectable()
export class MailboxService {
  constructor(private readonly mailboxes: MailboxRepository) {}

  /**
   * Only an admin bound to `*` creates mailboxes (docs/operators.md, "Limits and hardening"): one
   * bound to some mailboxes administers just those. Addresses are stored lower-case so that one
   * address cannot become two mailboxes.
   */
  async create(actor: Caller, address: string, name: string | null) {
    if (!actor.mailboxAccess.all) {
      throw new AlcartaError(
        'forbidden',
        'mailbox_out_of_reach',
        'Only an admin token bound to "*" can create mailboxes; this one administers just its own.',
      );
    }
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

  /**
   * The mailbox an inbound SMTP recipient names: `mailboxAddress` is already normalised (lower-case,
   * without a +tag). Not scoped to a caller: an MTA delivers to any mailbox of the installation.
   */
  findByAddress(mailboxAddress: string, manager?: EntityManager): Promise<MailboxEntity | null> {
    return this.mailboxes.findByAddress(mailboxAddress, manager);
  }

  /** The ids among `ids` that name no mailbox. */
  async unknownIds(ids: readonly string[]): Promise<string[]> {
    const existing = new Set(await this.mailboxes.existingIds(ids));
    return ids.filter((id) => !existing.has(id));
  }
}
