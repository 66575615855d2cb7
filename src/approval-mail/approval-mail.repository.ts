import { randomBase62 } from '../common/ids';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
import { ApprovalMailEntity } from './approval-mail.entity';

export type ApprovalMailChanges = Partial<
  Pick<ApprovalMailEntity, 'status' | 'nextAttemptAt' | 'error' | 'claimedBy' | 'leaseExpiresAt' | 'updatedAt'>
>;

/** What a queued mail says beyond its request: to whom, what kind, and a reply answer's note and thread. */
export type NewApprovalMail = Pick<ApprovalMailEntity, 'requestId' | 'email' | 'kind'> &
  Partial<Pick<ApprovalMailEntity, 'note' | 'inReplyTo'>>;

@Injectable()
export class ApprovalMailRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Queues `mails`, due now: each becomes a row with no attempt yet. */
  async queue(manager: EntityManager, mails: readonly NewApprovalMail[]): Promise<void> {
    if (mails.length === 0) return;
    const now = new Date();
    await manager.insert(
      ApprovalMailEntity,
      mails.map((mail) => ({
        note: null,
        inReplyTo: null,
        ...mail,
        id: `apm_${randomBase62(22)}`,
        status: 'queued' as const,
        attempts: 0,
        queuedAt: now,
        nextAttemptAt: now,
        claimedBy: null,
        leaseExpiresAt: null,
        error: null,
        updatedAt: now,
      })),
    );
  }

  /**
   * Claims up to `limit` due mails for `replicaId`, with their requests: queued ones whose time has
   * come and `sending` ones whose lease lapsed (their replica died mid-send). SKIP LOCKED as in the
   * outbox: replicas never wait for or take each other's rows. Times are the database's.
   */
  async claimDue(replicaId: string, leaseMs: number, limit: number): Promise<ApprovalMailEntity[]> {
    return this.dataSource.transaction(async (manager) => {
      // A CTE ending in SELECT: TypeORM answers a bare UPDATE … RETURNING as [rows, count].
      const rows: Array<{ id: string }> = await manager.query(
        `WITH due AS (
           SELECT id FROM approval_mails
            WHERE (status = 'queued' AND next_attempt_at <= now())
               OR (status = 'sending' AND lease_expires_at <= now())
            ORDER BY coalesce(next_attempt_at, lease_expires_at)
            LIMIT $3
              FOR UPDATE SKIP LOCKED
         ), claimed AS (
           UPDATE approval_mails m
              SET status = 'sending', claimed_by = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
                  attempts = m.attempts + 1, next_attempt_at = NULL, updated_at = now()
             FROM due
            WHERE m.id = due.id
           RETURNING m.id
         )
         SELECT id FROM claimed`,
        [replicaId, leaseMs, limit],
      );
      if (rows.length === 0) return [];
      return manager.find(ApprovalMailEntity, {
        where: { id: In(rows.map((r) => r.id)) },
        relations: { request: true },
      });
    });
  }

  /** Records how an attempt ended if `replicaId` still holds the claim; false when it lost it. */
  async finishClaim(id: string, replicaId: string, changes: ApprovalMailChanges): Promise<boolean> {
    const result = await this.dataSource.manager.update(
      ApprovalMailEntity,
      { id, status: 'sending', claimedBy: replicaId },
      { ...changes, claimedBy: null, leaseExpiresAt: null, updatedAt: new Date() },
    );
    return (result.affected ?? 0) > 0;
  }

  /** Milliseconds until the next mail falls due (a retry, or a lease that lapses); undefined: none. */
  async msUntilNextDue(): Promise<number | undefined> {
    const [row] = await this.dataSource.query<Array<{ ms: string | number | null }>>(
      `SELECT extract(epoch FROM (min(coalesce(next_attempt_at, lease_expires_at)) - now())) * 1000 AS ms
         FROM approval_mails WHERE status IN ('queued', 'sending')`,
    );
    return row?.ms === null || row?.ms === undefined ? undefined : Math.max(0, Number(row.ms));
  }

  /** Deletes mails that reached a final state (sent, failed, obsolete) before `cutoff`; answers how many. */
  deleteFinishedBefore(cutoff: Date): Promise<number> {
    return deleteInBatches(
      this.dataSource.manager,
      'approval_mails',
      `status IN ('sent', 'failed', 'obsolete') AND updated_at < $1`,
      [cutoff],
    );
  }
}
