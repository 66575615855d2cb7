import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { ArrayContainedBy, EntityManager, FindOptionsWhere, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { GrantEntity } from './grant.entity';
import { PrincipalClaims } from './principal.repository';

@Injectable()
export class GrantRepository {
  constructor(@InjectRepository(GrantEntity) private readonly grants: Repository<GrantEntity>) {}

  async insert(grant: Omit<GrantEntity, 'createdAt'>, manager?: EntityManager): Promise<GrantEntity> {
    const grants = manager?.getRepository(GrantEntity) ?? this.grants;
    await grants.insert(grant);
    return grants.findOneByOrFail({ id: grant.id });
  }

  findById(id: string): Promise<GrantEntity | null> {
    return this.grants.findOneBy({ id });
  }

  /** Grants only of mailboxes within `access` (every grant when it covers all mailboxes). */
  list(access: MailboxAccess): Promise<GrantEntity[]> {
    const where: FindOptionsWhere<GrantEntity> = access.all ? {} : { mailboxes: ArrayContainedBy([...access.ids]) };
    return this.grants.find({ where, order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /**
   * The union of the mailboxes granted to the principal's subject, client and groups (`['*']` when
   * any is to every mailbox), by the one SQL definition that stored principals use too.
   */
  async mailboxesOf(principal: PrincipalClaims): Promise<string[]> {
    const [row] = await this.grants.query<Array<{ mailboxes: string[] }>>(
      `SELECT principal_mailboxes($1, $2, $3::text[]) AS mailboxes`,
      [principal.subject, principal.clientId, [...principal.groups]],
    );
    return row.mailboxes;
  }

  async delete(manager: EntityManager, id: string): Promise<void> {
    await manager.delete(GrantEntity, { id });
  }
}
