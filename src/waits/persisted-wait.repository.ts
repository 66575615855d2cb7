import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In, LessThan } from 'typeorm';
import { AccessEndReason, hasLapsed, LAPSE_REASON_SQL, TOKEN_LAPSED_SQL } from '../auth/credential-revocation';
import { TokenEntity } from '../auth/token.entity';
import { EventLog } from '../events/event-log';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { AccessEnded, WaitResult } from './wait-spec';

export type TicketRefusal = 'ticket_invalid' | 'ticket_consumed' | 'ticket_expired';

/**
 * Runs in the transaction that fixes a wait's result, for whoever keeps something that depends on
 * it (a task completes with it). Registered by that module, so waits never write its tables.
 */
export type WaitResolutionHook = (manager: EntityManager, waitId: string, result: WaitResult) => Promise<void>;

/** The result recorded for a wait stopped before its outcome; nobody is ever shown it. */
const STOPPED: WaitResult = { matched: false, timed_out: false, shutdown: false, events: [] };

@Injectable()
export class PersistedWaitRepository {
  private readonly resolutionHooks: WaitResolutionHook[] = [];

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

  onResolved(hook: WaitResolutionHook): void {
    this.resolutionHooks.push(hook);
  }

  /**
   * Fixes the result of a pending wait; false when another replica was first (its result stands).
   * The resolution hooks run in the same transaction (a task the wait serves completes with it).
   * The doorbell wakes whoever waits for this result, on every replica.
   */
  async resolve(id: string, result: WaitResult): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const [rows] = await manager.query<[unknown[], number]>(
        `UPDATE waits SET status = 'resolved', result = $2, resolved_at = now()
          WHERE id = $1 AND status = 'pending' RETURNING id`,
        [id, JSON.stringify(result)],
      );
      if (rows.length === 0) return false;
      for (const hook of this.resolutionHooks) await hook(manager, id, result);
      await this.eventLog.ringDoorbell(manager, { kind: 'wait_resolved', waitId: id });
      return true;
    });
  }

  /**
   * Ends the token's pending waits without a result (it lost its access). No doorbell per wait:
   * the `credential_revoked` doorbell of the same transaction ends everything of the token.
   */
  async endForToken(manager: EntityManager, tokenId: string, reason: AccessEndReason): Promise<void> {
    const ended: AccessEnded = { error: 'unauthorized', reason };
    await manager.query(
      `UPDATE waits SET status = 'resolved', result = $2, resolved_at = now()
        WHERE token_id = $1 AND status = 'pending'`,
      [tokenId, JSON.stringify(ended)],
    );
  }

  /** Ends, in one statement, the pending waits of every revoked or expired token; returns those tokens. */
  async endForLapsedTokens(manager: EntityManager): Promise<string[]> {
    const [rows] = await manager.query<[Array<{ token_id: string }>, number]>(
      `UPDATE waits w
          SET status = 'resolved', resolved_at = now(),
              result = jsonb_build_object('error', 'unauthorized', 'reason', ${LAPSE_REASON_SQL})
         FROM tokens t
        WHERE t.id = w.token_id AND w.status = 'pending' AND ${TOKEN_LAPSED_SQL}
        RETURNING w.token_id`,
    );
    return [...new Set(rows.map((r) => r.token_id))];
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

  /**
   * Pending waits (all, or the listed ones) with the token they act for; never those of a revoked
   * or expired token, which nobody may watch any more.
   */
  async pending(ids?: readonly string[]): Promise<Array<{ wait: PersistedWaitEntity; token: TokenEntity }>> {
    const query = this.dataSource
      .getRepository(PersistedWaitEntity)
      .createQueryBuilder('w')
      .innerJoinAndSelect('w.token', 't')
      .where(`w.status = 'pending'`)
      .andWhere(`NOT ${TOKEN_LAPSED_SQL}`);
    if (ids) query.andWhere('w.id = ANY(:ids)', { ids });
    const rows = await query.getMany();
    return rows.map((wait) => ({ wait, token: wait.token! }));
  }

  /**
   * Consumes a websocket ticket: one conditional UPDATE, so exactly one of any number of racing
   * connections (on any replica) wins; PostgreSQL's row lock decides. The ticket of a revoked or
   * expired token is invalid, and stays unused. The wait comes with its token.
   */
  async consumeTicket(ticketHash: string): Promise<PersistedWaitEntity | TicketRefusal> {
    const [rows] = await this.dataSource.query<[Array<{ id: string }>, number]>(
      `UPDATE waits w SET ticket_consumed_at = now()
         FROM tokens t
        WHERE w.ticket_hash = $1 AND w.ticket_consumed_at IS NULL AND w.connect_deadline > now()
          AND t.id = w.token_id AND NOT ${TOKEN_LAPSED_SQL}
        RETURNING w.id`,
      [ticketHash],
    );
    const repository = this.dataSource.getRepository(PersistedWaitEntity);
    if (rows.length === 1) return repository.findOneOrFail({ where: { id: rows[0].id }, relations: { token: true } });
    const wait = await repository.findOne({ where: { ticketHash }, relations: { token: true } });
    if (!wait || hasLapsed(wait.token!)) return 'ticket_invalid';
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
