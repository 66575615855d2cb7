import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { LessThan, Repository } from 'typeorm';
import { ConsoleSessionEntity } from './console-session.entity';

@Injectable()
export class ConsoleSessionRepository {
  constructor(@InjectRepository(ConsoleSessionEntity) private readonly sessions: Repository<ConsoleSessionEntity>) {}

  async insert(session: Omit<ConsoleSessionEntity, 'createdAt'>): Promise<void> {
    await this.sessions.insert(session);
  }

  findByHash(secretHash: string): Promise<ConsoleSessionEntity | null> {
    return this.sessions.findOneBy({ secretHash });
  }

  async delete(secretHash: string): Promise<void> {
    await this.sessions.delete({ secretHash });
  }

  async deleteExpiredBefore(moment: Date): Promise<void> {
    await this.sessions.delete({ expiresAt: LessThan(moment) });
  }
}
