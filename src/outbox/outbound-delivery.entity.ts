import { Check, Column, Entity, Index, JoinColumn, ManyToOne, OneToOne, PrimaryColumn } from 'typeorm';
import { MailboxEntity } from '../mail/mailbox.entity';
import { MessageEntity } from '../mail/message.entity';

export type DeliveryStatus = 'queued' | 'sending' | 'sent' | 'retrying' | 'failed' | 'bounced' | 'not_configured';

/**
 * Why a delivery failed for good: the relay refused it (5xx), temporary failures went on past the
 * retry window, or the message no longer matched what a person approved, so it was never sent.
 */
export type DeliveryFailure = 'relay_refused' | 'retries_exhausted' | 'content_changed';

export const DELIVERY_STATUSES: readonly DeliveryStatus[] = [
  'queued',
  'sending',
  'sent',
  'retrying',
  'failed',
  'bounced',
  'not_configured',
];

/**
 * The delivery job of one outbound message (docs/mail.md): committed with the message when a person
 * approves it, claimed by one replica at a time (`claimed_by` until `lease_expires_at`), retried
 * with backoff until sent or failed.
 */
@Entity({ name: 'outbound_deliveries' })
@Check(
  'outbound_deliveries_status_check',
  `status IN ('queued', 'sending', 'sent', 'retrying', 'failed', 'bounced', 'not_configured')`,
)
@Index('outbound_deliveries_mailbox', ['mailboxId', 'updatedAt'])
@Index('outbound_deliveries_request', ['requestId'])
/** Partial indexes for the worker's claim (owned by the migration). */
@Index('outbound_deliveries_due', { synchronize: false })
@Index('outbound_deliveries_leases', { synchronize: false })
export class OutboundDeliveryEntity {
  @PrimaryColumn({ name: 'message_id', type: 'text' })
  messageId: string;

  @OneToOne(() => MessageEntity)
  @JoinColumn({ name: 'message_id', foreignKeyConstraintName: 'outbound_deliveries_message_id_fkey' })
  message?: MessageEntity;

  @Column({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @ManyToOne(() => MailboxEntity)
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'outbound_deliveries_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  /** The `send_email` request whose approval queued it. */
  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId: string | null;

  /**
   * The foreign key to the request, named by entity (not by class) because approvals/ sits above
   * outbox/: approving queues a delivery, so the outbox may not import the approvals module.
   */
  @ManyToOne('ApprovalRequestEntity')
  @JoinColumn({ name: 'request_id', foreignKeyConstraintName: 'outbound_deliveries_request_id_fkey' })
  request?: object;

  @Column({ type: 'text' })
  status: DeliveryStatus;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'queued_at', type: 'timestamptz' })
  queuedAt: Date;

  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true })
  nextAttemptAt: Date | null;

  @Column({ name: 'last_attempt_at', type: 'timestamptz', nullable: true })
  lastAttemptAt: Date | null;

  /** The relay's last answer (e.g. `250 2.0.0 Ok: queued as …`). */
  @Column({ type: 'text', nullable: true })
  response: string | null;

  /** Why the last attempt did not succeed. */
  @Column({ type: 'text', nullable: true })
  error: string | null;

  /** Why a `failed` delivery failed, as a code (see DeliveryFailure); null otherwise. */
  @Column({ type: 'text', nullable: true })
  reason: DeliveryFailure | null;

  /** The replica sending it now (with status `sending`). */
  @Column({ name: 'claimed_by', type: 'text', nullable: true })
  claimedBy: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  @Column({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
