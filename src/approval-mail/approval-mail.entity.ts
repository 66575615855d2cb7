import { Check, Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';

/** `obsolete`: the request was decided, expired or cancelled before its mail went out. */
export type ApprovalMailStatus = 'queued' | 'sending' | 'sent' | 'failed' | 'obsolete';

/**
 * What a mail is: the request put to an approver (`approval`), the same request put to whom its
 * policy escalates it (`escalation`), or the answer to a reply that decided nothing (`reply_answer`).
 */
export type ApprovalMailKind = 'approval' | 'escalation' | 'reply_answer';

/**
 * The delivery job of one approval mail: one approver, one request. Claimed by one replica at a
 * time (`claimed_by` until `lease_expires_at`) and retried with the outbox's backoff.
 */
@Entity({ name: 'approval_mails' })
@Check('approval_mails_status_check', `status IN ('queued', 'sending', 'sent', 'failed', 'obsolete')`)
@Check('approval_mails_kind_check', `kind IN ('approval', 'escalation', 'reply_answer')`)
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

  @Column({ type: 'text', default: 'approval' })
  kind: ApprovalMailKind;

  /** A reply answer's explanation (why the reply decided nothing); null for other kinds. */
  @Column({ type: 'text', nullable: true })
  note: string | null;

  /** A reply answer's `In-Reply-To`: the Message-ID of the reply it answers; null for other kinds. */
  @Column({ name: 'in_reply_to', type: 'text', nullable: true })
  inReplyTo: string | null;

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
