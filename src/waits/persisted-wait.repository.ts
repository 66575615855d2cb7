import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In, LessThan } from 'typeorm';
import { Credential } from '../auth/caller';
import { AccessEndReason, LAPSE_REASON_SQL, TOKEN_LAPSED_SQL } from '../auth/credential-revocation';
import { EventLog } from '../events/event-log';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { AccessEnded, WaitResult } from './wait-spec';

export type TicketRefusal = 'ticket_invalid' | 'ticket_consumed' | 'ticket_expired';

/** A websocket ticket that was just used: the wait, and the credential the socket acts for. */
export interface ConsumedTicket {
  wait: PersistedWaitEntity;
  credential: Credential;
}

/** On a `waits` row `w`: not ended because its credential lost its access (see AccessEnded). */
const NOT_ENDED_BY_ACCESS_SQL = `(w.result IS NULL OR NOT w.result ? 'error')`;

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

  /** Pending waits: all, or the listed ones. */
  pending(ids?: readonly string[]): Promise<PersistedWaitEntity[]> {
    const query = this.dataSource
      .getRepository(PersistedWaitEntity)
      .createQueryBuilder('w')
      .where(`w.status = 'pending'`);
    if (ids) query.andWhere('w.id = ANY(:ids)', { ids });
    return query.getMany();
  }

  /**
   * Consumes a websocket ticket: one conditional UPDATE, so exactly one of any number of racing
   * connections (on any replica) wins; PostgreSQL's row lock decides. The ticket is invalid, and
   * stays unused, when its credential lost its access: a revoked or expired token (read from the
   * `credentials` view of the auth module), or a wait already ended for that reason (a principal
   * that lost a mailbox). The wait comes with the credential the socket acts for.
   */
  async consumeTicket(ticketHash: string): Promise<ConsumedTicket | TicketRefusal> {
    const authenticatedAt = Date.now();
    const [rows] = await this.dataSource.query<[Array<{ id: string; expires_at: Date | null }>, number]>(
      `UPDATE waits w SET ticket_consumed_at = now()
         FROM credentials t
        WHERE w.ticket_hash = $1 AND w.ticket_consumed_at IS NULL AND w.connect_deadline > now()
          AND ${NOT_ENDED_BY_ACCESS_SQL} AND t.id = w.token_id AND NOT ${TOKEN_LAPSED_SQL}
        RETURNING w.id, t.expires_at`,
      [ticketHash],
    );
    const repository = this.dataSource.getRepository(PersistedWaitEntity);
    if (rows.length === 1) {
      const wait = await repository.findOneByOrFail({ id: rows[0].id });
      return { wait, credential: { tokenId: wait.tokenId, expiresAt: rows[0].expires_at, authenticatedAt } };
    }
    const [wait] = await this.dataSource.query<Array<{ consumed: boolean; usable: boolean }>>(
      `SELECT w.ticket_consumed_at IS NOT NULL AS consumed,
              ${NOT_ENDED_BY_ACCESS_SQL} AND EXISTS (SELECT 1 FROM credentials t WHERE t.id = w.token_id AND NOT ${TOKEN_LAPSED_SQL}) AS usable
         FROM waits w WHERE w.ticket_hash = $1`,
      [ticketHash],
    );
    if (!wait?.usable) return 'ticket_invalid';
    return wait.consumed ? 'ticket_consumed' : 'ticket_expired';
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
