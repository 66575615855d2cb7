import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';

/**
 * A link in an approval mail: single use, for one approver and one request, expiring with the
 * request. Only the SHA-256 of its token is stored.
 */
@Entity({ name: 'approval_links' })
@Index('approval_links_request', ['requestId'])
@Index('approval_links_message_id', ['messageId'], { unique: true, where: 'message_id IS NOT NULL' })
export class ApprovalLinkEntity {
  @PrimaryColumn({ name: 'token_hash', type: 'character', length: 64 })
  tokenHash: string;

  @Column({ name: 'request_id', type: 'text' })
  requestId: string;

  @ManyToOne(() => ApprovalRequestEntity)
  @JoinColumn({ name: 'request_id', foreignKeyConstraintName: 'approval_links_request_id_fkey' })
  request?: ApprovalRequestEntity;

  @Column({ type: 'text' })
  email: string;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  /** The Message-ID of the mail that carried the link: a reply to that mail decides as this link would. */
  @Column({ name: 'message_id', type: 'text', nullable: true })
  messageId: string | null;

  @Column({ name: 'used_at', type: 'timestamptz', nullable: true })
  usedAt: Date | null;
}
