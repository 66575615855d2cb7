import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, Repository } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
import { ConsoleSessionEntity } from './console-session.entity';

@Injectable()
export class ConsoleSessionRepository {
  constructor(@InjectRepository(ConsoleSessionEntity) private readonly sessions: Repository<ConsoleSessionEntity>) {}

  async insert(session: Omit<ConsoleSessionEntity, 'createdAt'>, manager?: EntityManager): Promise<void> {
    await (manager?.getRepository(ConsoleSessionEntity) ?? this.sessions).insert(session);
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

  /** Deletes the session inside the caller's transaction; whether it was still there. */
  async deleteIn(manager: EntityManager, secretHash: string): Promise<boolean> {
    const { affected } = await manager.delete(ConsoleSessionEntity, { secretHash });
    return (affected ?? 0) > 0;
  }

  /** Which of these sessions still exist. */
  async existing(secretHashes: readonly string[]): Promise<Set<string>> {
    const rows = await this.sessions.find({
      select: { secretHash: true },
      where: { secretHash: In([...secretHashes]) },
    });
    return new Set(rows.map((row) => row.secretHash));
  }
}
