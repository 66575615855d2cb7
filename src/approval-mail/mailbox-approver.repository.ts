import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { MailboxApproverEntity } from './mailbox-approver.entity';

@Injectable()
export class MailboxApproverRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The approvers of a mailbox, by address. */
  async list(mailboxId: string, manager: EntityManager = this.dataSource.manager): Promise<string[]> {
    const rows = await manager.find(MailboxApproverEntity, { where: { mailboxId }, order: { email: 'ASC' } });
    return rows.map((r) => r.email);
  }

  /** Replaces the whole list in one transaction. */
  async replace(mailboxId: string, emails: readonly string[]): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.delete(MailboxApproverEntity, { mailboxId });
      if (emails.length > 0)
        await manager.insert(
          MailboxApproverEntity,
          emails.map((email) => ({ mailboxId, email })),
        );
    });
  }
}
