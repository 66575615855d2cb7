import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, In, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { DeliveryStatus, OutboundDeliveryEntity } from './outbound-delivery.entity';

/** A delivery this replica just claimed, with the status it had before (for its event). */
export interface ClaimedDelivery {
  delivery: OutboundDeliveryEntity;
  previousStatus: DeliveryStatus;
}

export type DeliveryChanges = Partial<
  Pick<
    OutboundDeliveryEntity,
    | 'status'
    | 'attempts'
    | 'queuedAt'
    | 'nextAttemptAt'
    | 'response'
    | 'error'
    | 'reason'
    | 'claimedBy'
    | 'leaseExpiresAt'
    | 'updatedAt'
  >
>;

/** Statuses whose deliveries still have work ahead of them (the outbox depth). */
export const PENDING_STATUSES: readonly DeliveryStatus[] = ['queued', 'retrying', 'sending'];

@Injectable()
export class OutboundDeliveryRepository {
  constructor(
    @InjectRepository(OutboundDeliveryEntity) private readonly deliveries: Repository<OutboundDeliveryEntity>,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  async insert(manager: EntityManager, delivery: OutboundDeliveryEntity): Promise<void> {
    await manager.insert(OutboundDeliveryEntity, delivery);
  }

  findByMessageIds(messageIds: readonly string[]): Promise<OutboundDeliveryEntity[]> {
    return this.deliveries.findBy({ messageId: In([...messageIds]) });
  }

  /**
   * Claims up to `limit` due deliveries for `replicaId`: queued or retrying ones whose time has
   * come, and `sending` ones whose lease lapsed (their replica died mid-delivery). SKIP LOCKED lets
   * every replica claim at once without waiting on each other or taking the same row. Times are the
   * database's, so replicas with skewed clocks agree on what is due.
   */
  async claimDue(
    manager: EntityManager,
    replicaId: string,
    leaseMs: number,
    limit: number,
  ): Promise<ClaimedDelivery[]> {
    const rows: Array<{ message_id: string; previous_status: DeliveryStatus }> = await manager.query(
      `WITH due AS (
         SELECT message_id, status FROM outbound_deliveries
          WHERE (status IN ('queued', 'retrying') AND next_attempt_at <= now())
             OR (status = 'sending' AND lease_expires_at <= now())
          ORDER BY coalesce(next_attempt_at, lease_expires_at)
          LIMIT $3
          FOR UPDATE SKIP LOCKED
       ), claimed AS (
         UPDATE outbound_deliveries d
            SET status = 'sending', claimed_by = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
                attempts = d.attempts + 1, last_attempt_at = now(), next_attempt_at = NULL, updated_at = now()
           FROM due
          WHERE d.message_id = due.message_id
         RETURNING d.message_id, due.status AS previous_status
       )
       SELECT message_id, previous_status FROM claimed`,
      [replicaId, leaseMs, limit],
    );
    if (rows.length === 0) return [];
    const previous = new Map(rows.map((r) => [r.message_id, r.previous_status]));
    const claimed = await manager.find(OutboundDeliveryEntity, {
      where: { messageId: In([...previous.keys()]) },
      relations: { message: true },
    });
    return claimed.map((delivery) => ({ delivery, previousStatus: previous.get(delivery.messageId)! }));
  }

  /**
   * The delivery, locked, if `replicaId` still holds its claim; null when it lost it (the lease
   * lapsed and another replica took it, or a bounce report arrived first). Also the database's clock.
   */
  async lockClaim(
    manager: EntityManager,
    messageId: string,
    replicaId: string,
  ): Promise<{ delivery: OutboundDeliveryEntity; now: Date } | null> {
    const delivery = await manager.findOne(OutboundDeliveryEntity, {
      where: { messageId, status: 'sending', claimedBy: replicaId },
      lock: { mode: 'pessimistic_write' },
    });
    if (!delivery) return null;
    const [{ now }] = await manager.query<Array<{ now: Date }>>(`SELECT now() AS now`);
    return { delivery, now };
  }

  async update(manager: EntityManager, messageId: string, changes: DeliveryChanges): Promise<void> {
    await manager.update(OutboundDeliveryEntity, { messageId }, changes);
  }

  /** Milliseconds until the next delivery falls due (a retry, or a lease that lapses); undefined: none. */
  async msUntilNextDue(): Promise<number | undefined> {
    const [row] = await this.dataSource.query<Array<{ ms: string | number | null }>>(
      `SELECT extract(epoch FROM (min(due) - now())) * 1000 AS ms FROM (
         SELECT min(next_attempt_at) AS due FROM outbound_deliveries WHERE status IN ('queued', 'retrying')
         UNION ALL
         SELECT min(lease_expires_at) FROM outbound_deliveries WHERE status = 'sending'
       ) t`,
    );
    return row?.ms === null || row?.ms === undefined ? undefined : Math.max(0, Number(row.ms));
  }

  /** Newest first, with the message, within the caller's mailboxes. */
  list(access: MailboxAccess, status: DeliveryStatus | undefined, limit: number): Promise<OutboundDeliveryEntity[]> {
    return this.deliveries.find({
      where: {
        ...(status && { status }),
        ...(!access.all && { mailboxId: In([...access.ids]) }),
      },
      relations: { message: true },
      order: { queuedAt: 'DESC', messageId: 'DESC' },
      take: limit,
    });
  }

  findWithMessages(messageIds: readonly string[]): Promise<OutboundDeliveryEntity[]> {
    return this.deliveries.find({ where: { messageId: In([...messageIds]) }, relations: { message: true } });
  }

  /** The delivery of a message within the caller's mailboxes, locked for a change. */
  findVisibleForUpdate(
    manager: EntityManager,
    messageId: string,
    access: MailboxAccess,
  ): Promise<OutboundDeliveryEntity | null> {
    return manager.findOne(OutboundDeliveryEntity, {
      where: { messageId, ...(!access.all && { mailboxId: In([...access.ids]) }) },
      lock: { mode: 'pessimistic_write' },
    });
  }

  /**
   * The deliveries of `mailboxId`'s outbound message with this Message-ID that a bounce can still
   * concern (sent, or on their way), locked.
   */
  async findBounceable(
    manager: EntityManager,
    mailboxId: string,
    messageIdHeader: string,
  ): Promise<OutboundDeliveryEntity[]> {
    const rows: Array<{ message_id: string }> = await manager.query(
      `SELECT d.message_id FROM outbound_deliveries d JOIN messages m ON m.id = d.message_id
        WHERE m.mailbox_id = $1 AND m.message_id_header = $2 AND m.direction = 'outbound'
          AND d.status IN ('sent', 'sending', 'retrying')
        ORDER BY d.message_id
          FOR UPDATE OF d`,
      [mailboxId, messageIdHeader],
    );
    if (rows.length === 0) return [];
    return manager.findBy(OutboundDeliveryEntity, { messageId: In(rows.map((r) => r.message_id)) });
  }

  /** Deliveries by status, across all mailboxes (for metrics). */
  countsByStatus(): Promise<Array<{ status: DeliveryStatus; count: number }>> {
    return this.deliveries
      .createQueryBuilder('d')
      .select('d.status', 'status')
      .addSelect('count(*)::int', 'count')
      .groupBy('d.status')
      .getRawMany<{ status: DeliveryStatus; count: number }>();
  }

  /** Seconds since the oldest delivery still waiting to be sent was queued; 0 when none waits. */
  async oldestPendingAgeSeconds(): Promise<number> {
    const [row] = await this.dataSource.query<Array<{ age: string | number }>>(
      `SELECT coalesce(extract(epoch FROM now() - min(queued_at)), 0) AS age
         FROM outbound_deliveries WHERE status IN ('queued', 'retrying', 'sending')`,
    );
    return Math.max(0, Number(row?.age ?? 0));
  }
}
