import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, IsNull } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
import { ApprovalLinkEntity } from './approval-link.entity';

@Injectable()
export class ApprovalLinkRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async insert(link: ApprovalLinkEntity, manager: EntityManager = this.dataSource.manager): Promise<void> {
    await manager.insert(ApprovalLinkEntity, link);
  }

  /** The link with this token hash and its request. */
  findWithRequest(tokenHash: string): Promise<ApprovalLinkEntity | null> {
    return this.dataSource.manager.findOne(ApprovalLinkEntity, { where: { tokenHash }, relations: { request: true } });
  }

  /** This link is spent (its approver's approval was recorded; the request waits for more). */
  async markUsed(tokenHash: string): Promise<void> {
    await this.dataSource.manager.update(ApprovalLinkEntity, { tokenHash, usedAt: IsNull() }, { usedAt: new Date() });
  }

  /** Every still unused link of the request is spent: one decision per request, whoever made it. */
  async markRequestUsed(requestId: string): Promise<void> {
    await this.dataSource.manager.update(ApprovalLinkEntity, { requestId, usedAt: IsNull() }, { usedAt: new Date() });
  }

  /**
   * Deletes the links that were used or expired before `cutoff` and whose request no longer waits;
   * answers how many.
   */
  deleteSpentBefore(cutoff: Date): Promise<number> {
    return deleteInBatches(
      this.dataSource.manager,
      'approval_links',
      `(used_at < $1 OR expires_at < $1)
       AND NOT EXISTS (SELECT 1 FROM approval_requests r WHERE r.id = approval_links.request_id AND r.state = 'pending')`,
      [cutoff],
    );
  }
}
