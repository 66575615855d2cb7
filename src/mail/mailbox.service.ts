import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Caller } from '../kernel/caller';
import { AlcartaError, notFound } from '../kernel/errors';
import { newId } from '../common/ids';
import { AuditLog } from '../audit/audit-log';
import { MailHooks } from './mail-hooks';
import { MailboxEntity } from './mailbox.entity';
import { MailboxRepository } from './mailbox.repository';
import { mailboxView } from './message.views';

@Injectable()
export class MailboxService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly mailboxes: MailboxRepository,
    private readonly hooks: MailHooks,
    private readonly audit: AuditLog,
  ) {}

  /**
   * Only an admin bound to `*` creates mailboxes (docs/operators.md, "Limits and hardening"): one
   * bound to some mailboxes administers just those. Addresses are stored lower-case so that one
   * address cannot become two mailboxes. With a connected account (`source`), the account is checked
   * first and the mailbox and its source are stored together or not at all.
   */
  async create(actor: Caller, address: string, name: string | null, source?: object | null) {
    if (!actor.mailboxAccess.all) {
      throw new AlcartaError(
        'forbidden',
        'mailbox_out_of_reach',
        'Only an admin token bound to "*" can create mailboxes; this one administers just its own.',
      );
    }
    const prepared = source ? await this.hooks.sources.prepare(undefined, source) : undefined;
    const id = newId('mbx');
    const mailbox = await this.dataSource.transaction(async (manager) => {
      const inserted = await this.mailboxes.insert({ id, address: address.trim().toLowerCase(), name }, manager);
      if (prepared !== undefined) await this.hooks.sources.save(manager, id, prepared);
      await this.audit.append(manager, {
        action: 'mailbox_created',
        actor,
        subject: { mailbox_id: id, address: inserted.address, connected: prepared !== undefined },
      });
      return inserted;
    });
    return this.view(mailbox);
  }

  /**
   * Renames a mailbox and changes, pauses or disconnects (`source: null`) its connected account. The
   * new source is checked before anything is written; then everything is written in one transaction.
   */
  async update(actor: Caller, mailboxId: string, changes: { name?: string | null; source?: object | null }) {
    await this.getVisible(actor, mailboxId);
    const prepared = changes.source ? await this.hooks.sources.prepare(mailboxId, changes.source) : undefined;
    await this.dataSource.transaction(async (manager) => {
      if (changes.name !== undefined) await this.mailboxes.rename(manager, mailboxId, changes.name);
      if (changes.source === null) await this.hooks.sources.remove(manager, mailboxId);
      if (prepared !== undefined) await this.hooks.sources.save(manager, mailboxId, prepared);
      await this.audit.append(manager, {
        action: 'mailbox_updated',
        actor,
        subject: {
          mailbox_id: mailboxId,
          renamed: changes.name !== undefined,
          source: changes.source === null ? 'removed' : prepared !== undefined ? 'changed' : 'unchanged',
        },
      });
    });
    return this.view(await this.getVisible(actor, mailboxId));
  }

  async get(caller: Caller, mailboxId: string) {
    return this.view(await this.getVisible(caller, mailboxId));
  }

  async list(caller: Caller) {
    const mailboxes = await this.mailboxes.list(caller.mailboxAccess);
    const sources = await this.hooks.sources.views(mailboxes.map((m) => m.id));
    return { mailboxes: mailboxes.map((m) => mailboxView(m, sources.get(m.id))) };
  }

  private async view(mailbox: MailboxEntity) {
    const sources = await this.hooks.sources.views([mailbox.id]);
    return mailboxView(mailbox, sources.get(mailbox.id));
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
