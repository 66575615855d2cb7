import { Check, Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { ApprovalLinkEntity } from './approval-link.entity';

/** `done`: decided, or answered (or left unanswered on purpose); `outcome` says which. */
export type ApprovalReplyStatus = 'queued' | 'processing' | 'done';

/**
 * A reply to an approval mail, waiting for the approval mail worker to decide it (docs/approvers.md,
 * "Deciding by reply"). Recorded in the transaction that stored the reply as a message (keyed by that
 * message's id), with what deciding needs: who sent it, whether that is verified, and what it says.
 * Claimed by one replica at a time, as approval mails are.
 */
@Entity({ name: 'approval_replies' })
@Check('approval_replies_status_check', `status IN ('queued', 'processing', 'done')`)
@Check('approval_replies_decision_check', `decision IN ('approved', 'rejected')`)
@Index('approval_replies_link', ['tokenHash'])
/** Partial index for the claim (owned by the migration). */
@Index('approval_replies_due', { synchronize: false })
export class ApprovalReplyEntity {
  /** The stored inbound message (`msg_…`) that is the reply. */
  @PrimaryColumn({ name: 'message_id', type: 'text' })
  messageId: string;

  /** The link of the approval mail it answers: the approver and request it may decide as. */
  @Column({ name: 'token_hash', type: 'character', length: 64 })
  tokenHash: string;

  @ManyToOne(() => ApprovalLinkEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'token_hash', foreignKeyConstraintName: 'approval_replies_token_hash_fkey' })
  link?: ApprovalLinkEntity;

  /** The reply's From address. */
  @Column({ type: 'text' })
  sender: string;

  @Column({ name: 'from_verified', type: 'boolean' })
  fromVerified: boolean;

  /** The first word's decision; null: unclear. */
  @Column({ type: 'text', nullable: true })
  decision: 'approved' | 'rejected' | null;

  @Column({ type: 'text', nullable: true })
  reason: string | null;

  /** The reply's own Message-ID header: the answer's In-Reply-To. */
  @Column({ name: 'header_message_id', type: 'text', nullable: true })
  headerMessageId: string | null;

  @Column({ type: 'text', default: 'queued' })
  status: ApprovalReplyStatus;

  /** What came of it: the request's state, or why it decided nothing (the answer's reason). */
  @Column({ type: 'text', nullable: true })
  outcome: string | null;

  /** Whether an answer was queued for it. */
  @Column({ type: 'boolean', default: false })
  answered: boolean;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'claimed_by', type: 'text', nullable: true })
  claimedBy: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  @Column({ name: 'received_at', type: 'timestamptz', default: () => 'now()' })
  receivedAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
