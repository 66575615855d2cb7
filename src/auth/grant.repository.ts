import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { ArrayContainedBy, EntityManager, FindOptionsWhere, Repository } from 'typeorm';
import { MailboxAccess } from './caller';
import { GrantEntity } from './grant.entity';

@Injectable()
export class GrantRepository {
  constructor(@InjectRepository(GrantEntity) private readonly grants: Repository<GrantEntity>) {}

  async insert(grant: Omit<GrantEntity, 'createdAt'>): Promise<GrantEntity> {
    await this.grants.insert(grant);
    return this.grants.findOneByOrFail({ id: grant.id });
  }

  findById(id: string): Promise<GrantEntity | null> {
    return this.grants.findOneBy({ id });
  }

  /** Grants only of mailboxes within `access` (every grant when it covers all mailboxes). */
  list(access: MailboxAccess): Promise<GrantEntity[]> {
    const where: FindOptionsWhere<GrantEntity> = access.all ? {} : { mailboxes: ArrayContainedBy([...access.ids]) };
    return this.grants.find({ where, order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /** The union of the mailboxes granted to any of `principals`, in one query (one parameter, however many groups). */
  async mailboxesOf(principals: readonly string[]): Promise<string[]> {
    if (principals.length === 0) return [];
    const rows = await this.grants
      .createQueryBuilder('g')
      .select('DISTINCT unnest(g.mailboxes)', 'mailbox')
      .where('g.principal = ANY(:principals)', { principals: [...principals] })
      .getRawMany<{ mailbox: string }>();
    return rows.map((r) => r.mailbox).sort();
  }

  /** Deletes the grant and returns it, or null when it was already gone. */
  async delete(manager: EntityManager, id: string): Promise<GrantEntity | null> {
    const result = await manager
      .createQueryBuilder()
      .delete()
      .from(GrantEntity)
      .where({ id })
      .returning(['id', 'principal', 'mailboxes', 'created_at', 'created_by'])
      .execute();
    const rows = result.raw as DeletedGrantRow[];
    const row = rows[0];
    if (!row) return null;
    return {
      id: row.id,
      principal: row.principal,
      mailboxes: row.mailboxes,
      createdAt: row.created_at,
      createdBy: row.created_by,
    };
  }
}

interface DeletedGrantRow {
  id: string;
  principal: string;
  mailboxes: string[];
  created_at: Date;
  created_by: string;
}
