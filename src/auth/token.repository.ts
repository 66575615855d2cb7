import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, IsNull, Repository } from 'typeorm';
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

  list(): Promise<TokenEntity[]> {
    return this.tokens.find({ order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /** Sets `revoked_at` once; revoking again keeps the first time. */
  async revoke(id: string): Promise<void> {
    await this.tokens.update({ id, revokedAt: IsNull() }, { revokedAt: () => 'now()' });
  }

  async isEmpty(manager: EntityManager): Promise<boolean> {
    return !(await manager.getRepository(TokenEntity).exists());
  }
}
