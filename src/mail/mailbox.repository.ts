import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, QueryFailedError, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { conflict } from '../kernel/errors';
import { MailboxEntity } from './mailbox.entity';

const UNIQUE_VIOLATION = '23505';

@Injectable()
export class MailboxRepository {
  constructor(@InjectRepository(MailboxEntity) private readonly mailboxes: Repository<MailboxEntity>) {}

  /** Inside `manager`'s transaction when one is given. */
  async insert(
    mailbox: Pick<MailboxEntity, 'id' | 'address' | 'name'>,
    manager?: EntityManager,
  ): Promise<MailboxEntity> {
    const repository = manager?.getRepository(MailboxEntity) ?? this.mailboxes;
    try {
      await repository.insert(mailbox);
    } catch (err) {
      if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) {
        throw conflict('address_taken', `A mailbox with the address ${mailbox.address} already exists.`, {
          address: mailbox.address,
        });
      }
      throw err;
    }
    return repository.findOneByOrFail({ id: mailbox.id });
  }

  async rename(manager: EntityManager, id: string, name: string | null): Promise<void> {
    await manager.update(MailboxEntity, { id }, { name });
  }

  list(access: MailboxAccess): Promise<MailboxEntity[]> {
    return this.mailboxes.find({
      where: access.all ? {} : { id: In([...access.ids]) },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
  }

  async findVisible(id: string, access: MailboxAccess): Promise<MailboxEntity | null> {
    if (!access.all && !access.ids.includes(id)) return null;
    return this.mailboxes.findOneBy({ id });
  }

  /** The mailbox with this (lower-case) address; inside `manager`'s transaction when one is given. */
  findByAddress(address: string, manager?: EntityManager): Promise<MailboxEntity | null> {
    return (manager?.getRepository(MailboxEntity) ?? this.mailboxes).findOneBy({ address });
  }

  async existingIds(ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.mailboxes.find({ select: { id: true }, where: { id: In([...ids]) } });
    return rows.map((r) => r.id);
  }
}
