import { Check, Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';

/** `obsolete`: the request was decided, expired or cancelled before its mail went out. */
export type ApprovalMailStatus = 'queued' | 'sending' | 'sent' | 'failed' | 'obsolete';

/**
 * The delivery job of one approval mail: one approver, one request. Claimed by one replica at a
 * time (`claimed_by` until `lease_expires_at`) and retried with the outbox's backoff.
 */
@Entity({ name: 'approval_mails' })
@Check('approval_mails_status_check', `status IN ('queued', 'sending', 'sent', 'failed', 'obsolete')`)
@Index('approval_mails_request', ['requestId'])
/** Partial index for the claim (owned by the migration). */
@Index('approval_mails_due', { synchronize: false })
export class ApprovalMailEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ name: 'request_id', type: 'text' })
  requestId: string;

  @ManyToOne(() => ApprovalRequestEntity)
  @JoinColumn({ name: 'request_id', foreignKeyConstraintName: 'approval_mails_request_id_fkey' })
  request?: ApprovalRequestEntity;

  @Column({ type: 'text' })
  email: string;

  @Column({ type: 'text' })
  status: ApprovalMailStatus;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'queued_at', type: 'timestamptz' })
  queuedAt: Date;

  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true })
  nextAttemptAt: Date | null;

  @Column({ name: 'claimed_by', type: 'text', nullable: true })
  claimedBy: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  @Column({ type: 'text', nullable: true })
  error: string | null;

  @Column({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
