import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { ApprovalLinkEntity } from './approval-link.entity';
import { ApprovalReplyEntity } from './approval-reply.entity';

export type ApprovalReplyRecord = Pick<
  ApprovalReplyEntity,
  'messageId' | 'tokenHash' | 'sender' | 'fromVerified' | 'decision' | 'reason' | 'headerMessageId'
>;

@Injectable()
export class ApprovalReplyRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * The links of the approval mails with these Message-IDs whose request belongs to `mailboxId` (a
   * reply counts only in the mailbox that sent the mail, so a copy Cc'd elsewhere is not decided twice).
   */
  linksByMessageId(
    manager: EntityManager,
    mailboxId: string,
    messageIds: readonly string[],
  ): Promise<ApprovalLinkEntity[]> {
    return manager
      .createQueryBuilder(ApprovalLinkEntity, 'l')
      .innerJoin('l.request', 'r')
      .where('l.message_id IN (:...ids)', { ids: messageIds })
      .andWhere('r.mailbox_id = :mailboxId', { mailboxId })
      .getMany();
  }

  /** Records a reply to decide; a message already recorded (the same copy stored again) is left as it is. */
  async insert(manager: EntityManager, reply: ApprovalReplyRecord): Promise<void> {
    await manager.createQueryBuilder().insert().into(ApprovalReplyEntity).values(reply).orIgnore().execute();
  }

  /**
   * Claims up to `limit` replies for `replicaId`, with their links and requests: queued ones, and
   * `processing` ones whose lease lapsed (their replica died mid-decision). SKIP LOCKED, as for mails.
   */
  async claimDue(replicaId: string, leaseMs: number, limit: number): Promise<ApprovalReplyEntity[]> {
    return this.dataSource.transaction(async (manager) => {
      const rows: Array<{ message_id: string }> = await manager.query(
        `WITH due AS (
           SELECT message_id FROM approval_replies
            WHERE status = 'queued' OR (status = 'processing' AND lease_expires_at <= now())
            ORDER BY coalesce(lease_expires_at, received_at)
            LIMIT $3
              FOR UPDATE SKIP LOCKED
         ), claimed AS (
           UPDATE approval_replies a
              SET status = 'processing', claimed_by = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
                  attempts = a.attempts + 1, updated_at = now()
             FROM due
            WHERE a.message_id = due.message_id
           RETURNING a.message_id
         )
         SELECT message_id FROM claimed`,
        [replicaId, leaseMs, limit],
      );
      if (rows.length === 0) return [];
      return manager.find(ApprovalReplyEntity, {
        where: { messageId: In(rows.map((r) => r.message_id)) },
        relations: { link: { request: true } },
      });
    });
  }

  /**
   * Marks the reply done if `replicaId` still holds the claim, running `alsoInTransaction` (queueing
   * its answer) only then, so an answer is queued at most once per reply. False: the claim was lost.
   */
  async finishClaim(
    messageId: string,
    replicaId: string,
    outcome: string,
    answered: boolean,
    alsoInTransaction: (manager: EntityManager) => Promise<void>,
  ): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const result = await manager.update(
        ApprovalReplyEntity,
        { messageId, status: 'processing', claimedBy: replicaId },
        { status: 'done', outcome, answered, claimedBy: null, leaseExpiresAt: null, updatedAt: new Date() },
      );
      if ((result.affected ?? 0) === 0) return false;
      await alsoInTransaction(manager);
      return true;
    });
  }

  /** How many replies to this link were answered: answers per link are capped (a flood of replies). */
  answeredFor(tokenHash: string): Promise<number> {
    return this.dataSource.manager.count(ApprovalReplyEntity, { where: { tokenHash, answered: true } });
  }

  /** Milliseconds until a reply is due (a queued one: now; a lapsing lease); undefined: none. */
  async msUntilNextDue(): Promise<number | undefined> {
    const [row] = await this.dataSource.query<Array<{ ms: string | number | null }>>(
      `SELECT extract(epoch FROM (min(coalesce(lease_expires_at, received_at)) - now())) * 1000 AS ms
         FROM approval_replies WHERE status <> 'done'`,
    );
    return row?.ms === null || row?.ms === undefined ? undefined : Math.max(0, Number(row.ms));
  }
}
