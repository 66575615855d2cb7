import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
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

  /** Deletes the sessions that expired before `moment`; answers how many. */
  deleteExpiredBefore(moment: Date): Promise<number> {
    return deleteInBatches(this.sessions.manager, 'console_sessions', 'expires_at < $1', [moment]);
  }
}
