import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { ApprovalPolicy } from './approval-policy';
import { MailboxPolicyEntity } from './mailbox-policy.entity';

/** A stored policy and when it was last set. */
export interface StoredPolicy {
  policy: ApprovalPolicy;
  updatedAt: Date;
}

@Injectable()
export class MailboxPolicyRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The mailbox's policy; null when it has none. */
  async find(mailboxId: string, manager: EntityManager = this.dataSource.manager): Promise<StoredPolicy | null> {
    const row = await manager.findOneBy(MailboxPolicyEntity, { mailboxId });
    return row && { policy: toPolicy(row), updatedAt: row.updatedAt };
  }

  /** Sets the whole policy of a mailbox (it replaces the one before). */
  async put(manager: EntityManager, mailboxId: string, policy: ApprovalPolicy, updatedBy: string): Promise<Date> {
    const updatedAt = new Date();
    await manager.upsert(
      MailboxPolicyEntity,
      {
        mailboxId,
        approvers: policy.approvers === null ? null : [...policy.approvers],
        quorum: policy.quorum,
        expiresAfterSeconds: policy.expiresAfterSeconds,
        escalateAfterSeconds: policy.escalateAfterSeconds,
        escalateTo: [...policy.escalateTo],
        recipientsAllow: [...policy.recipients.allow],
        recipientsBlock: [...policy.recipients.block],
        autoApprove: policy.recipients.autoApprove,
        updatedAt,
        updatedBy,
      },
      ['mailboxId'],
    );
    return updatedAt;
  }
}

function toPolicy(row: MailboxPolicyEntity): ApprovalPolicy {
  return {
    approvers: row.approvers,
    quorum: row.quorum,
    expiresAfterSeconds: row.expiresAfterSeconds,
    escalateAfterSeconds: row.escalateAfterSeconds,
    escalateTo: row.escalateTo,
    recipients: { allow: row.recipientsAllow, block: row.recipientsBlock, autoApprove: row.autoApprove },
  };
}
