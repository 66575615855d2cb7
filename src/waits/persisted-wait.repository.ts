import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In, LessThan } from 'typeorm';
import { TokenEntity } from '../auth/token.entity';
import { EventLog } from '../events/event-log';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { WaitResult } from './wait-spec';

export type TicketRefusal = 'ticket_invalid' | 'ticket_consumed' | 'ticket_expired';

/** The result recorded for a wait stopped before its outcome; nobody is ever shown it. */
const STOPPED: WaitResult = { matched: false, timed_out: false, shutdown: false, events: [] };

@Injectable()
export class PersistedWaitRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly eventLog: EventLog,
  ) {}

  /**
   * Stores a new wait and tells every replica to watch it. `alongside` writes rows that belong with
   * it (a task) in the same transaction.
   */
  async insert(
    wait: Omit<PersistedWaitEntity, 'createdAt'>,
    alongside?: (manager: EntityManager) => Promise<void>,
  ): Promise<PersistedWaitEntity> {
    return this.dataSource.transaction(async (manager) => {
      await manager.insert(PersistedWaitEntity, wait);
      await alongside?.(manager);
      await this.eventLog.ringDoorbell(manager, { kind: 'wait_created', waitId: wait.id });
      return manager.findOneByOrFail(PersistedWaitEntity, { id: wait.id });
    });
  }

  /**
   * Fixes the result of a pending wait; false when another replica was first (its result stands).
   * A task the wait serves is completed in the same transaction, with the result as its
   * CallToolResult (structured content plus the same JSON as text). The doorbell wakes whoever
   * waits for this result, on every replica.
   */
  async resolve(id: string, result: WaitResult): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const json = JSON.stringify(result);
      const [rows] = await manager.query<[unknown[], number]>(
        `UPDATE waits SET status = 'resolved', result = $2, resolved_at = now()
          WHERE id = $1 AND status = 'pending' RETURNING id`,
        [id, json],
      );
      if (rows.length === 0) return false;
      await manager.query(
        `UPDATE tasks
            SET status = 'completed', last_updated_at = now(),
                result = jsonb_build_object(
                  'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', $2::text)),
                  'structuredContent', $2::jsonb)
          WHERE wait_id = $1 AND status = 'working'`,
        [id, json],
      );
      await this.eventLog.ringDoorbell(manager, { kind: 'wait_resolved', waitId: id });
      return true;
    });
  }

  /** Ends a pending wait nobody needs any more (its task was cancelled): every replica stops watching. */
  async stop(manager: EntityManager, id: string): Promise<void> {
    await manager.query(
      `UPDATE waits SET status = 'resolved', result = $2, resolved_at = now() WHERE id = $1 AND status = 'pending'`,
      [id, JSON.stringify(STOPPED)],
    );
    await this.eventLog.ringDoorbell(manager, { kind: 'wait_resolved', waitId: id });
  }

  /** Deletes waits (their tasks expired); replicas watching them let go. */
  async remove(manager: EntityManager, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await manager.delete(PersistedWaitEntity, { id: In([...ids]) });
    for (const id of ids) await this.eventLog.ringDoorbell(manager, { kind: 'wait_resolved', waitId: id });
  }

  find(id: string): Promise<PersistedWaitEntity | null> {
    return this.dataSource.getRepository(PersistedWaitEntity).findOneBy({ id });
  }

  findForToken(id: string, tokenId: string): Promise<PersistedWaitEntity | null> {
    return this.dataSource.getRepository(PersistedWaitEntity).findOneBy({ id, tokenId });
  }

  /** Pending waits (all, or the listed ones) with the token they act for. */
  async pending(ids?: readonly string[]): Promise<Array<{ wait: PersistedWaitEntity; token: TokenEntity }>> {
    const query = this.dataSource
      .getRepository(PersistedWaitEntity)
      .createQueryBuilder('w')
      .innerJoinAndSelect('w.token', 't')
      .where(`w.status = 'pending'`);
    if (ids) query.andWhere('w.id = ANY(:ids)', { ids });
    const rows = await query.getMany();
    return rows.map((wait) => ({ wait, token: wait.token! }));
  }

  /**
   * Consumes a websocket ticket: one conditional UPDATE, so exactly one of any number of racing
   * connections (on any replica) wins; PostgreSQL's row lock decides.
   */
  async consumeTicket(ticketHash: string): Promise<PersistedWaitEntity | TicketRefusal> {
    const [rows] = await this.dataSource.query<[Array<{ id: string }>, number]>(
      `UPDATE waits SET ticket_consumed_at = now()
        WHERE ticket_hash = $1 AND ticket_consumed_at IS NULL AND connect_deadline > now()
        RETURNING id`,
      [ticketHash],
    );
    if (rows.length === 1) return (await this.find(rows[0].id))!;
    const wait = await this.dataSource.getRepository(PersistedWaitEntity).findOneBy({ ticketHash });
    if (!wait) return 'ticket_invalid';
    return wait.ticketConsumedAt ? 'ticket_consumed' : 'ticket_expired';
  }

  /**
   * Deletes results older than the retention period; returns how many. A task keeps its own copy
   * of the result, so the waits behind tasks go too.
   */
  async purgeResolvedBefore(cutoff: Date): Promise<number> {
    const result = await this.dataSource
      .getRepository(PersistedWaitEntity)
      .delete({ status: 'resolved', resolvedAt: LessThan(cutoff) });
    return result.affected ?? 0;
  }
}
