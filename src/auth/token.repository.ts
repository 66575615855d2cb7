import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { ArrayContainedBy, EntityManager, FindOptionsWhere, IsNull, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { TokenEntity } from './token.entity';

@Injectable()
export class TokenRepository {
  constructor(@InjectRepository(TokenEntity) private readonly tokens: Repository<TokenEntity>) {}

  async insert(token: Omit<TokenEntity, 'createdAt'>, manager?: EntityManager): Promise<TokenEntity> {
    const repo = manager ? manager.getRepository(TokenEntity) : this.tokens;
    await repo.insert(token);
    return repo.findOneByOrFail({ id: token.id });
  }

  findByHash(secretHash: string): Promise<TokenEntity | null> {
    return this.tokens.findOneBy({ secretHash });
  }

  findById(id: string): Promise<TokenEntity | null> {
    return this.tokens.findOneBy({ id });
  }

  /** Tokens bound only to mailboxes within `access` (every token when it covers all mailboxes). */
  list(access: MailboxAccess): Promise<TokenEntity[]> {
    const where: FindOptionsWhere<TokenEntity> = access.all ? {} : { mailboxes: ArrayContainedBy([...access.ids]) };
    return this.tokens.find({ where, order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /** Sets `revoked_at` once (revoking again keeps the first time); true when it was set now. */
  async revoke(manager: EntityManager, id: string): Promise<boolean> {
    const result = await manager.update(TokenEntity, { id, revokedAt: IsNull() }, { revokedAt: () => 'now()' });
    return (result.affected ?? 0) > 0;
  }

  async isEmpty(manager: EntityManager): Promise<boolean> {
    return !(await manager.getRepository(TokenEntity).exists());
  }
}
