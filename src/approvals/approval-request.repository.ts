import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, FindOptionsWhere, In, IsNull, Not, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { ApprovalRequestEntity, RequestState } from './approval-request.entity';

export interface RequestListFilter {
  access: MailboxAccess;
  /** One state, or any of several (the console's history: every decided state). */
  state?: RequestState | readonly RequestState[];
  mailboxId?: string;
  limit: number;
  /**
   * Newest first by creation (the default, as the REST list and the pending list show them) or by
   * decision (history).
   */
  newestBy?: 'created' | 'decided';
}

@Injectable()
export class ApprovalRequestRepository {
  constructor(@InjectRepository(ApprovalRequestEntity) private readonly requests: Repository<ApprovalRequestEntity>) {}

  async insert(manager: EntityManager, request: ApprovalRequestEntity): Promise<ApprovalRequestEntity> {
    await manager.insert(ApprovalRequestEntity, request);
    return manager.findOneByOrFail(ApprovalRequestEntity, { id: request.id });
  }

  findVisible(id: string, access: MailboxAccess): Promise<ApprovalRequestEntity | null> {
    return this.requests.findOneBy(visible(access, { id }));
  }

  /** Reads the request and locks it until the transaction ends, so concurrent decisions queue up. */
  lockVisible(manager: EntityManager, id: string, access: MailboxAccess): Promise<ApprovalRequestEntity | null> {
    return manager.findOne(ApprovalRequestEntity, {
      where: visible(access, { id }),
      lock: { mode: 'pessimistic_write' },
    });
  }

  async update(manager: EntityManager, request: ApprovalRequestEntity): Promise<void> {
    await manager.update(
      ApprovalRequestEntity,
      { id: request.id },
      {
        state: request.state,
        decidedAt: request.decidedAt,
        decidedBy: request.decidedBy,
        reason: request.reason,
        decidedContentSha256: request.decidedContentSha256,
        sentMessageId: request.sentMessageId,
        approvals: request.approvals,
        escalatedAt: request.escalatedAt,
      },
    );
  }

  /** Any request by id, whoever may see it: for checks of the service itself, never for a caller. */
  findById(id: string): Promise<ApprovalRequestEntity | null> {
    return this.requests.findOneBy({ id });
  }

  /** With `mailboxId`, the caller has already checked that the mailbox is visible. */
  list(filter: RequestListFilter): Promise<ApprovalRequestEntity[]> {
    const where: FindOptionsWhere<ApprovalRequestEntity> = {};
    if (filter.state) where.state = typeof filter.state === 'string' ? filter.state : In([...filter.state]);
    if (filter.mailboxId) where.mailboxId = filter.mailboxId;
    // Said outright (terminal states always have it) so the partial index on decided_at applies.
    if (filter.newestBy === 'decided') where.decidedAt = Not(IsNull());
    return this.requests.find({
      where: filter.mailboxId ? where : visible(filter.access, where),
      order: filter.newestBy === 'decided' ? { decidedAt: 'DESC', id: 'DESC' } : { createdAt: 'DESC', id: 'DESC' },
      take: filter.limit,
    });
  }

  /** How many requests of the mailboxes `access` reaches are pending (the console's header shows it). */
  countPending(access: MailboxAccess): Promise<number> {
    return this.requests.countBy(visible(access, { state: 'pending' }));
  }

  /**
   * Pending requests past their expiry, locked; rows another replica's sweeper holds are skipped,
   * so sweepers on several replicas share the work instead of waiting on each other.
   */
  lockOverdue(manager: EntityManager, limit: number): Promise<ApprovalRequestEntity[]> {
    return manager
      .createQueryBuilder(ApprovalRequestEntity, 'r')
      .where(`r.state = 'pending' AND r.expires_at <= now()`)
      .orderBy('r.expires_at', 'ASC')
      .limit(limit)
      .setLock('pessimistic_write')
      .setOnLocked('skip_locked')
      .getMany();
  }

  /**
   * Pending requests whose escalation time came and that are not escalated yet, locked, skipping
   * rows another replica holds (as lockOverdue). Expired ones are left to expiry: only a request
   * still waiting for a decision escalates. The condition is the partial index's.
   */
  lockEscalationDue(manager: EntityManager, limit: number): Promise<ApprovalRequestEntity[]> {
    return manager
      .createQueryBuilder(ApprovalRequestEntity, 'r')
      .where(`r.state = 'pending' AND r.escalated_at IS NULL AND r.escalate_at IS NOT NULL`)
      .andWhere('r.escalate_at <= now() AND r.expires_at > now()')
      .orderBy('r.escalate_at', 'ASC')
      .limit(limit)
      .setLock('pessimistic_write')
      .setOnLocked('skip_locked')
      .getMany();
  }
}

function visible(
  access: MailboxAccess,
  where: FindOptionsWhere<ApprovalRequestEntity>,
): FindOptionsWhere<ApprovalRequestEntity> {
  return access.all ? where : { ...where, mailboxId: In([...access.ids]) };
}
