import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { MailboxEntity } from '../mail/mailbox.entity';
import { MessageEntity } from '../mail/message.entity';
import type { RecordedApproval } from './approval-policy';
import type { SanitizedCounts } from './draft-sanitizer';

export type RequestKind = 'send_email' | 'approval';
export type RequestState = 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled';

export const REQUEST_STATES: readonly RequestState[] = ['pending', 'approved', 'rejected', 'expired', 'cancelled'];
export const TERMINAL_STATES: readonly RequestState[] = ['approved', 'rejected', 'expired', 'cancelled'];

/** The email a `send_email` request will record (and send) once a person approves it. */
export interface EmailDraft {
  from: string;
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html: string | null;
  in_reply_to_message_id: string | null;
}

@Entity({ name: 'approval_requests' })
@Check('approval_requests_kind_check', `kind IN ('send_email', 'approval')`)
@Check('approval_requests_state_check', `state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')`)
@Index('approval_requests_mailbox_created', ['mailboxId', 'createdAt'])
/** Pending requests by expiry, for the sweeper (partial; owned by the migration). */
@Index('approval_requests_pending_expiry', { synchronize: false })
/** Decided requests by decision time, for the console's history (partial; owned by the migration). */
@Index('approval_requests_decided', { synchronize: false })
/** Pending requests due for escalation, for the escalator (partial; owned by the migration). */
@Index('approval_requests_escalation_due', { synchronize: false })
export class ApprovalRequestEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @ManyToOne(() => MailboxEntity)
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'approval_requests_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  @Column({ type: 'text' })
  kind: RequestKind;

  @Column({ type: 'text' })
  state: RequestState;

  @Column({ type: 'text' })
  title: string;

  @Column({ type: 'text', nullable: true })
  details: string | null;

  @Column({ type: 'jsonb', nullable: true })
  email: EmailDraft | null;

  /**
   * What sanitizing removed from the draft's HTML when the request was made (send_email only). NULL on
   * an email request stored before drafts were sanitized: such a draft cannot be approved.
   */
  @Column({ type: 'jsonb', nullable: true })
  sanitized: SanitizedCounts | null;

  /** The hash of what is asked (see request-content.ts), fixed when the request is made. */
  @Column({ name: 'content_sha256', type: 'text' })
  contentSha256: string;

  /** The hash of the content the person who approved or rejected it saw; null until then. */
  @Column({ name: 'decided_content_sha256', type: 'text', nullable: true })
  decidedContentSha256: string | null;

  /** Binding id of the credential that asked: a token's `tok_…` or an OAuth principal's `prn_…`. */
  @Column({ name: 'created_by', type: 'text' })
  createdBy: string;

  /**
   * The OAuth client (`azp`/`client_id`) of the access token that asked; null for a static token.
   * With `created_by` it recognises the requester when a client acts for itself (client credentials).
   */
  @Column({ name: 'requester_client_id', type: 'text', nullable: true })
  requesterClientId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'decided_at', type: 'timestamptz', nullable: true })
  decidedAt: Date | null;

  /** Id of the token that approved, rejected or cancelled; null for expiry. */
  @Column({ name: 'decided_by', type: 'text', nullable: true })
  decidedBy: string | null;

  @Column({ type: 'text', nullable: true })
  reason: string | null;

  /** How many distinct approvers must approve: the mailbox policy's quorum when the request was made. */
  @Column({ type: 'integer', default: 1 })
  quorum: number;

  /** The approvals so far, oldest first; the one that reaches the quorum is the last. */
  @Column({ type: 'jsonb', default: () => "'[]'" })
  approvals: RecordedApproval[];

  /** When nobody deciding by then escalates it (the policy's escalate_after_seconds); null: never. */
  @Column({ name: 'escalate_at', type: 'timestamptz', nullable: true })
  escalateAt: Date | null;

  /** When it was escalated; set once, by the one replica that escalated it. */
  @Column({ name: 'escalated_at', type: 'timestamptz', nullable: true })
  escalatedAt: Date | null;

  @Column({ name: 'sent_message_id', type: 'text', nullable: true })
  sentMessageId: string | null;

  @ManyToOne(() => MessageEntity)
  @JoinColumn({ name: 'sent_message_id', foreignKeyConstraintName: 'approval_requests_sent_message_id_fkey' })
  sentMessage?: MessageEntity;
}
