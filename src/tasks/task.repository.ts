import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import { LAPSE_REASON_SQL, TOKEN_LAPSED_SQL } from '../auth/credential-revocation';
import { PersistedWaitRepository, WaitResolution } from '../waits/persisted-wait.repository';
import { TaskEntity, TaskStatus } from './task.entity';

export interface TaskPosition {
  createdAt: Date;
  id: string;
}

@Injectable()
export class TaskRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly waits: PersistedWaitRepository,
  ) {}

  async insert(task: TaskEntity, manager: EntityManager = this.dataSource.manager): Promise<void> {
    await manager.insert(TaskEntity, task as QueryDeepPartialEntity<TaskEntity>);
  }

  /** How many tasks (of every token) are in each status; a status without tasks is absent. */
  async countsByStatus(): Promise<Map<TaskStatus, number>> {
    const rows = await this.dataSource
      .getRepository(TaskEntity)
      .createQueryBuilder('t')
      .select('t.status', 'status')
      .addSelect('count(*)::int', 'count')
      .groupBy('t.status')
      .getRawMany<{ status: TaskStatus; count: number }>();
    return new Map(rows.map((r) => [r.status, r.count]));
  }

  /** The task if it belongs to the token; tasks of other tokens do not exist for it. */
  findForToken(id: string, tokenId: string): Promise<TaskEntity | null> {
    return this.dataSource.getRepository(TaskEntity).findOneBy({ id, tokenId });
  }

  /** Working tasks of the token, counted under a transaction-level lock per token. */
  async countWorkingLocked(manager: EntityManager, tokenId: string): Promise<number> {
    await manager.query(`SELECT pg_advisory_xact_lock(hashtext('alcarta.tasks:' || $1))`, [tokenId]);
    return manager.countBy(TaskEntity, { tokenId, status: 'working' });
  }

  /** A page of the token's tasks, oldest first, after `after`. */
  page(tokenId: string, after: TaskPosition | undefined, limit: number): Promise<TaskEntity[]> {
    const query = this.dataSource
      .getRepository(TaskEntity)
      .createQueryBuilder('t')
      .where('t.token_id = :tokenId', { tokenId })
      .orderBy('t.created_at', 'ASC')
      .addOrderBy('t.id', 'ASC')
      .limit(limit);
    if (after) query.andWhere('(t.created_at, t.id) > (:createdAt, :id)', after);
    return query.getMany();
  }

  /**
   * Cancels a non-terminal task of the token and stops its wait, in one transaction, so a match
   * that commits later finds nothing to complete. Returns the task as it is afterwards (unchanged
   * when it was terminal already), or null when the token has no such task.
   */
  async cancel(id: string, tokenId: string, message: string): Promise<{ task: TaskEntity; cancelled: boolean } | null> {
    return this.dataSource.transaction(async (manager) => {
      const task = await manager.findOne(TaskEntity, { where: { id, tokenId }, lock: { mode: 'pessimistic_write' } });
      if (!task) return null;
      if (task.status !== 'working' && task.status !== 'input_required') return { task, cancelled: false };
      await manager.update(
        TaskEntity,
        { id },
        { status: 'cancelled', statusMessage: message, lastUpdatedAt: () => 'now()' },
      );
      if (task.waitId) await this.waits.stop(manager, task.waitId);
      return { task: await manager.findOneByOrFail(TaskEntity, { id }), cancelled: true };
    });
  }

  /**
   * Completes the working tasks the waits serve, in the transaction that fixed the waits' results,
   * each with its result as its CallToolResult (structured content plus the same JSON as text).
   * Two statements: which of the waits have a working task (ids only: most batches of websocket or
   * `wait_id` waits have none), then one UPDATE for those, their results as one JSON document.
   */
  async completeForWaits(manager: EntityManager, resolved: readonly WaitResolution[]): Promise<void> {
    if (resolved.length === 0) return;
    const rows = await manager.query<Array<{ wait_id: string }>>(
      `SELECT wait_id FROM tasks WHERE wait_id = ANY($1::text[]) AND status = 'working'`,
      [resolved.map((r) => r.waitId)],
    );
    if (rows.length === 0) return;
    const withTask = new Set(rows.map((r) => r.wait_id));
    const results = resolved
      .filter((r) => withTask.has(r.waitId))
      .map((r) => ({ wait_id: r.waitId, result: JSON.stringify(r.result) }));
    await manager.query(
      `UPDATE tasks t
          SET status = 'completed', last_updated_at = now(),
              result = jsonb_build_object(
                'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', r.result)),
                'structuredContent', r.result::jsonb)
         FROM jsonb_to_recordset($1::jsonb) AS r(wait_id text, result text)
        WHERE t.wait_id = r.wait_id AND t.status = 'working'`,
      [JSON.stringify(results)],
    );
  }

  /**
   * Cancels the token's working tasks (their waits are ended by the waits module). Alcarta never
   * asks for input, so no task is `input_required`; `working` alone lets the partial index serve.
   */
  async cancelForToken(manager: EntityManager, tokenId: string, message: string): Promise<void> {
    await manager.query(
      `UPDATE tasks SET status = 'cancelled', status_message = $2, last_updated_at = now()
        WHERE token_id = $1 AND status = 'working'`,
      [tokenId, message],
    );
  }

  /**
   * Cancels, in one statement, the working tasks of every revoked or expired token, with the
   * message `messages` gives for the reason; returns those tokens.
   */
  async cancelForLapsedTokens(
    manager: EntityManager,
    messages: { token_revoked: string; token_expired: string },
  ): Promise<string[]> {
    const [rows] = await manager.query<[Array<{ token_id: string }>, number]>(
      `UPDATE tasks k
          SET status = 'cancelled', last_updated_at = now(),
              status_message = CASE ${LAPSE_REASON_SQL} WHEN 'token_revoked' THEN $1 ELSE $2 END
         FROM tokens t
        WHERE t.id = k.token_id AND k.status = 'working' AND ${TOKEN_LAPSED_SQL}
        RETURNING k.token_id`,
      [messages.token_revoked, messages.token_expired],
    );
    return [...new Set(rows.map((r) => r.token_id))];
  }

  /** Deletes tasks past their ttl, and stops and deletes their waits; returns how many tasks. */
  async purgeExpired(): Promise<number> {
    return this.dataSource.transaction(async (manager) => {
      const [rows] = await manager.query<[Array<{ wait_id: string | null }>, number]>(
        `DELETE FROM tasks WHERE expires_at <= now() RETURNING wait_id`,
      );
      await this.waits.remove(
        manager,
        rows.map((r) => r.wait_id).filter((id): id is string => id !== null),
      );
      return rows.length;
    });
  }
}
